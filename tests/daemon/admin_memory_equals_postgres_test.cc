// The store's administration (projections/store_admin.h) in memory
// (projections/memory_admin.h) does what it does on PostgreSQL
// (connectors/postgres_admin.cc): `plan`, `apply`, `status` and `prune` run
// the same scenario on both stores through the one interface, and plan's
// report, apply's report and the documents after it (every bucket's place),
// the status summary, the prune report and what remains after it must be
// equal, as tests/connectors/memory_equals_postgres_test.cc holds the
// batches' results equal.
#include <chrono>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/apply.h"
#include "daemon/engine.h"
#include "daemon/memory_run.h"
#include "daemon/replay.h"
#include "projections/memory_admin.h"
#include "tests/article_changes.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::ArticleText;
using testing::Changes;
using testing::ConfigChange;
using testing::LogSlice;
using testing::Parse;
using testing::SourcePath;
using testing::Sql;

// One store the scenarios run on: its factory, how its documents are read,
// and how its tombstones and dead letters are made old (prune's retention).
struct Side {
  std::string name;
  StoreFactory stores;
  std::function<DocumentSet(const Config&)> documents;
  // Every tombstone 2 days old, the oldest dead letter 40 days.
  std::function<void()> age;
  // "collection: written N, deleted M" of the outbox rows `source` captured.
  std::function<std::string(const std::string& source)> captured;
};

// The memory store, and PostgreSQL on the test's schema (dropped first).
class BothStores : public ::testing::Test {
 protected:
  BothStores() : schema_(testing::TestSchemaName()) {
    Sql("drop schema if exists " + schema_ + " cascade");
    memory_side_.name = "memory";
    memory_side_.stores = MemoryStores(&memory_);
    memory_side_.documents = [this](const Config& config) {
      return MemoryDocumentSet(config, memory_.state());
    };
    memory_side_.age = [this] {
      MemoryState* state = memory_.mutable_state();
      const double now =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      for (const auto& entity : state->entities) {
        if (entity.second.deleted) state->updated_at[entity.first] = now - 2 * 86400;
      }
      if (!state->dead_letters_received_at.empty()) {
        state->dead_letters_received_at[0] = now - 40 * 86400;
      }
    };
    memory_side_.captured = [this](const std::string& source) {
      std::map<std::string, std::pair<uint64_t, uint64_t>> counts;
      for (const OutboxRow& row : memory_.state().outbox) {
        if (row.source != source) continue;
        (row.doc ? counts[row.collection].first : counts[row.collection].second)++;
      }
      std::string out;
      for (const auto& c : counts) {
        out += c.first + ": written " + std::to_string(c.second.first) + ", deleted " +
               std::to_string(c.second.second) + "\n";
      }
      return out;
    };
    postgres_side_.name = "postgres";
    postgres_side_.stores = PostgresStores(testing::TestPostgresUrl());
    postgres_side_.documents = testing::ReadDocumentSet;
    postgres_side_.age = [this] {
      Sql("update " + schema_ + ".entities set updated_at = now() - interval '2 days'"
          " where deleted");
      Sql("update " + schema_ + ".dead_letters set received_at = now() - interval '40 days'"
          " where seq = (select min(seq) from " + schema_ + ".dead_letters)");
    };
    postgres_side_.captured = [this](const std::string& source) {
      std::string out;
      for (const std::string& line :
           Sql("select collection, count(*) filter (where doc is not null),"
               " count(*) filter (where doc is null) from " + schema_ + ".outbox where source = '" +
               source + "' group by 1 order by 1")) {
        const size_t first = line.find('\t'), second = line.find('\t', first + 1);
        out += line.substr(0, first) + ": written " + line.substr(first + 1, second - first - 1) +
               ", deleted " + line.substr(second + 1) + "\n";
      }
      return out;
    };
  }

  // Replays `log` into the side's store with `config`.
  static void Replay(const Side& side, const Config& config, const std::string& log) {
    Engine engine(config, side.stores);
    Status status = engine.store.Open();
    ASSERT_TRUE(status.ok()) << side.name << ": " << status.ToString();
    ReplayReport report;
    status = ReplayLog(engine.decoder, engine.applier, &engine.store, log, ReplayOptions(), &report);
    ASSERT_TRUE(status.ok()) << side.name << ": " << status.ToString();
  }

  // Plans or applies `target` on the side's store; batches of `running`
  // replay `during_build` after the build and `during_catch_up` after the
  // first catch-up round (when not "").
  static ReconfigureReport Reconfigure(const Side& side, const Config& target, bool plan,
                                       const Config* running = nullptr,
                                       const std::string& during_build = "",
                                       const std::string& during_catch_up = "") {
    ReconfigureOptions options;
    options.stores = side.stores;
    options.plan_only = plan;
    options.at_step = [&](const char* step) {
      if (std::string(step) == "apply_built" && !during_build.empty()) {
        Replay(side, *running, during_build);
      }
      if (std::string(step) == "apply_caught_up" && !during_catch_up.empty()) {
        Replay(side, *running, during_catch_up);
      }
    };
    ReconfigureReport report;
    Status status;
    // PostgreSQL releases the administration lock of the command before
    // (its connection closed) a moment later, in the server: Busy until then.
    for (int attempt = 0; attempt < 100; ++attempt) {
      report = ReconfigureReport();
      status = denormd::Reconfigure(target, options, &report);
      if (!status.IsBusy()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(status.ok()) << side.name << ": " << status.ToString();
    return report;
  }

  // Runs `use` on the side's store of `config`, opened as `status` and
  // `prune` open it.
  static void Inspect(const Side& side, const Config& config,
                      const std::function<Status(StoreAdministration&)>& use) {
    Engine engine(config, side.stores);
    Status status = engine.store.Open(StoreAdministration::OpenMode::kInspect);
    if (status.ok()) status = use(engine.store);
    EXPECT_TRUE(status.ok()) << side.name << ": " << status.ToString();
  }

  // The side's summary for `status` with `config`.
  static StoreSummary Summary(const Side& side, const Config& config) {
    StoreSummary summary;
    Inspect(side, config, [&](StoreAdministration& store) { return store.Summarize(&summary); });
    return summary;
  }

  // What `denormd prune` with `config`'s retention does on the side's store.
  static PruneReport Prune(const Side& side, const Config& config) {
    PruneReport report;
    Inspect(side, config, [&](StoreAdministration& store) {
      return store.Prune(config.retention, 100, &report, nullptr, nullptr);
    });
    return report;
  }

  std::string ArticleOn(const std::vector<const ConfigChange*>& edits) const {
    return ArticleText(schema_, edits);
  }

  const std::string schema_;
  MemoryStore memory_;
  Side memory_side_;
  Side postgres_side_;
};

// What a report says, but its times.
std::string Describe(const ReconfigureReport& r) {
  std::ostringstream out;
  out << "had model " << r.had_model << ", epoch " << r.from_epoch << " (" << r.from_fingerprint
      << ") -> " << r.to_epoch << " (" << r.to_fingerprint << "), leftovers removed "
      << r.cleaned_leftovers << ", " << r.entities_reindexed << " entities reindexed, "
      << r.documents_built << " documents built, " << r.journal_changes << " changes caught up\n";
  for (const CollectionCounts& c : r.collections) {
    out << c.collection << (c.dropped ? " (dropped)" : "") << ": written " << c.written
        << ", deleted " << c.deleted << ", unchanged " << c.unchanged << "\n";
  }
  for (const std::string& warning : r.warnings) out << "warning: " << warning << "\n";
  return out.str();
}

std::string Describe(const StoreSummary& s) {
  std::ostringstream out;
  for (const StoredPosition& p : s.positions) {
    out << "position " << p.at.source << "/" << p.at.partition << " @" << p.at.position
        << ": applied " << p.applied << ", stale " << p.stale << ", dead " << p.dead << "\n";
  }
  for (const std::string& table : s.leftover_tables) out << "leftover " << table << "\n";
  for (const auto& c : s.documents) out << "collection " << c.first << ": " << c.second << "\n";
  for (const auto& e : s.entities) out << "entity " << e.first << ": " << e.second << "\n";
  out << "tombstones " << s.tombstones << ", dead letters " << s.dead_letters << ", feed "
      << s.feed << "\n";
  return out.str();
}

std::string Describe(const PruneReport& r) {
  std::ostringstream out;
  out << r.tombstones << " tombstones, " << r.dead_letters << " dead letters, stale apply cleared "
      << r.stale_apply_cleared << " (" << r.stale_journal_rows << " journal rows)";
  return out.str();
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

// plan, apply (with batches of the old model during the build and the
// catch-up), status and prune: the same on both stores.
TEST_F(BothStores, PlanApplyStatusAndPruneGiveTheSameResults) {
  const std::vector<const ConfigChange*> all = {&Changes()[0], &Changes()[1], &Changes()[2],
                                                &Changes()[3], &Changes()[4]};
  const Config v1 = Parse(ArticleOn({}));
  Config v2 = Parse(ArticleOn(all));
  v2.retention.tombstone_hours = 24;
  v2.retention.dead_letter_days = 30;
  v2.retention.max_dead_letters = 3;
  const std::string log = SourcePath("tests/data/article/events-random.jsonl");
  const std::string first = LogSlice(log, 0, 2000, "first.jsonl");
  const std::string second = LogSlice(log, 2000, 2800, "second.jsonl");
  const std::string third = LogSlice(log, 2800, 100000, "third.jsonl");

  struct Outcome {
    std::string plan, apply, status, prune, after_prune;
    DocumentSet documents, documents_after_prune;
  };
  std::vector<Outcome> outcomes;
  for (const Side* side : {&memory_side_, &postgres_side_}) {
    SCOPED_TRACE(side->name);
    Outcome o;
    Replay(*side, v1, first);
    o.plan = Describe(Reconfigure(*side, v2, /*plan=*/true));
    o.apply = Describe(Reconfigure(*side, v2, /*plan=*/false, &v1, second, third));
    o.documents = side->documents(v2);
    o.status = Describe(Summary(*side, v2));
    side->age();
    o.prune = Describe(Prune(*side, v2));
    o.after_prune = Describe(Summary(*side, v2));
    o.documents_after_prune = side->documents(v2);
    outcomes.push_back(std::move(o));
  }
  const Outcome& memory = outcomes[0];
  const Outcome& postgres = outcomes[1];
  EXPECT_EQ(memory.plan, postgres.plan);
  EXPECT_NE(std::string::npos, postgres.plan.find("book_titles: written ")) << postgres.plan;
  EXPECT_EQ(memory.apply, postgres.apply);
  EXPECT_NE(std::string::npos, postgres.apply.find("-> 2 (")) << postgres.apply;
  DiffOptions exact;
  exact.bucket_positions = true;
  EXPECT_EQ("", Joined(DiffDocumentSets(memory.documents, postgres.documents, exact)))
      << "(memory != PostgreSQL after apply)";
  EXPECT_EQ(memory.status, postgres.status);
  EXPECT_EQ(memory.prune, postgres.prune);
  EXPECT_NE(0u, postgres.prune.find("0 tombstones")) << "(nothing pruned) " << postgres.prune;
  EXPECT_EQ(memory.after_prune, postgres.after_prune);
  EXPECT_EQ("", Joined(DiffDocumentSets(memory.documents_after_prune,
                                        postgres.documents_after_prune, exact)));
}

// A killed apply (its build left, its mark recorded): status shows the same
// leftovers on both stores, batches journal for it, and prune clears the
// same mark and journal; the next apply then gives the same documents.
TEST_F(BothStores, AKilledApplyIsShownAndClearedTheSameWay) {
  const Config v1 = Parse(ArticleOn({}));
  const Config v2 = Parse(ArticleOn({&Changes()[2], &Changes()[4]}));
  const std::string log = SourcePath("tests/data/article/events-random.jsonl");
  const std::string first = LogSlice(log, 0, 2000, "first.jsonl");
  const std::string second = LogSlice(log, 2000, 2500, "second.jsonl");
  struct Killed {};
  std::vector<std::string> status, pruned, applied;
  std::vector<bool> marked;
  std::vector<DocumentSet> documents;
  for (const Side* side : {&memory_side_, &postgres_side_}) {
    SCOPED_TRACE(side->name);
    Replay(*side, v1, first);
    ReconfigureOptions options;
    options.stores = side->stores;
    options.at_step = [](const char* step) {
      if (std::string(step) == "apply_built") throw Killed();
    };
    ReconfigureReport report;
    EXPECT_THROW(denormd::Reconfigure(v2, options, &report), Killed);
    Replay(*side, v1, second);  // journaled for the dead apply
    Engine engine(v1, side->stores);
    ASSERT_TRUE(engine.store.Open().ok());
    marked.push_back(!engine.store.stored_model().applying.empty());
    status.push_back(Describe(Summary(*side, v1)));
    pruned.push_back(Describe(Prune(*side, v1)));
    applied.push_back(Describe(Reconfigure(*side, v2, /*plan=*/false)));
    documents.push_back(side->documents(v2));
  }
  EXPECT_EQ(std::vector<bool>({true, true}), marked);
  EXPECT_EQ(status[0], status[1]);
  EXPECT_NE(std::string::npos, status[1].find("leftover authors__next")) << status[1];
  EXPECT_EQ(pruned[0], pruned[1]);
  EXPECT_NE(std::string::npos, pruned[1].find("stale apply cleared 1")) << pruned[1];
  EXPECT_EQ(applied[0], applied[1]);
  DiffOptions exact;
  exact.bucket_positions = true;
  EXPECT_EQ("", Joined(DiffDocumentSets(documents[0], documents[1], exact)));
}

// With a change feed, the switch captures the same changes in both outboxes.
TEST_F(BothStores, TheSwitchCapturesTheSameChangesForTheFeed) {
  const std::string feed = "feed:\n  topic: documents\n";
  const Config v1 = Parse(ArticleOn({}) + feed);
  const Config v2 = Parse(ArticleOn({&Changes()[1], &Changes()[4]}) + feed +
                          "  collections: {book_titles: titles}\n");
  std::vector<std::string> captured;
  for (const Side* side : {&memory_side_, &postgres_side_}) {
    SCOPED_TRACE(side->name);
    Replay(*side, v1, SourcePath("tests/data/article/events.jsonl"));
    Reconfigure(*side, v2, /*plan=*/false);
    captured.push_back(side->captured("apply epoch 2"));
  }
  EXPECT_EQ(captured[0], captured[1]);
  EXPECT_NE(std::string::npos, captured[1].find("book_titles: written ")) << captured[1];
}

}  // namespace
}  // namespace denormd
