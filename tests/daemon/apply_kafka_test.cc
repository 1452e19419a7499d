// `denormd apply` while events flow through Kafka into two `denormd run`
// instances of one group: five model changes, cumulative, each applied while a
// publisher keeps sending the random article log in small chunks:
//   v2  a field added to an embed's select   (posts.recentComments + createdAt)
//   v3  a projection added                   (book_titles, with a lookup)
//   v4  a `via` relation changed             (authors.books: ids -> embed ordered by
//                                             name: a new index relation)
//   v5  a projection removed                 (portfolios)
//   v6  a bucket size changed                (post_comments: 100 -> 7)
// After each: both instances were fenced and run the store's new model (and
// still run), `verify` is clean, `status` shows the new epoch, `plan`/`apply`
// again say there is nothing to change, and the documents equal a fresh
// `replay` of every event published so far with the new config. Meanwhile a
// reader polls the collections and checks that every observation is all old
// or all new, and never goes back from new to old.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "connectors/postgres_sql.h"
#include "projections/document_set.h"
#include "projections/json.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::DaemonProcess;
using testing::EventsProcessed;
using testing::RunDenormd;
using testing::SourcePath;
using testing::Sql;
using testing::SqlCount;
using testing::WaitUntil;

constexpr int kPatience = 180;         // seconds before a wait counts as hung
constexpr size_t kInitialEvents = 800;  // published before the first apply
constexpr size_t kChunk = 25;          // events per `denormd publish` while applying
constexpr int kChunkPauseMs = 40;      // between two chunks (pacing, not timing)
constexpr int kChanges = 5;

// `text` with its one occurrence of `from` replaced by `to`.
std::string Replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(std::string::npos, at) << "not in the config: " << from;
  if (at == std::string::npos) return text;
  EXPECT_EQ(std::string::npos, text.find(from, at + 1)) << "more than once: " << from;
  return text.replace(at, from.size(), to);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

Config Load(const std::string& file) {
  std::vector<ConfigError> errors;
  std::optional<Config> config = LoadConfig(file, &errors);
  for (const ConfigError& error : errors) ADD_FAILURE() << error.ToString(file);
  if (!config) return Config();
  config->store.postgres = testing::TestPostgresUrl();
  return *config;
}

// One model version: the file the daemons and commands use, and the same
// projections on a scratch schema for the fresh replay.
struct Version {
  std::string file;
  std::string replay_file;
  Config config;
  Config replay_config;
};

// v1 (the article config on the test's schema and topic) and the five
// changes, each on top of the previous one.
std::vector<Version> Versions(const std::string& schema, const std::string& replay_schema,
                              const std::string& v1) {
  std::vector<std::string> texts = {v1};
  // 1. A field added to an embedded select. (The article's addresses have no
  //    `country`, and people never changes after the first events: the
  //    comments of posts flow all along, most with a createdAt.)
  texts.push_back(Replaced(texts.back(), "        limit: 3\n        select: [id, author, comment]\n",
                           "        limit: 3\n        select: [id, author, comment, createdAt]\n"));
  // 2. A projection added, with a lookup by the book's pubId.
  texts.push_back(Replaced(texts.back(), "  catalog_books:",
                           "  book_titles:\n"
                           "    from: book\n"
                           "    include: [name]\n"
                           "    fields:\n"
                           "      publisherName: {lookup: publisher, by: pubId, select: {name: name}}\n"
                           "  catalog_books:"));
  // 3. A `via` relation changed: the books of an author become an embed
  //    ordered by name, a relation the reference index does not have yet
  //    ("book authorIds order name": apply builds its rows while batches run).
  texts.push_back(Replaced(texts.back(), "      books: {ids: book, via: authorIds}\n",
                           "      books: {embed: book, via: authorIds, order_by: name, "
                           "select: [id, name]}\n"));
  // 4. A projection removed.
  {
    std::string text = texts.back();
    const size_t begin = text.find("  portfolios:"), end = text.find("  stocks:");
    EXPECT_TRUE(begin != std::string::npos && end != std::string::npos && begin < end);
    if (begin != std::string::npos && end != std::string::npos) text.erase(begin, end - begin);
    texts.push_back(text);
  }
  // 5. A bucket size changed (the default `stable` layout; see CompareWithReplay).
  texts.push_back(Replaced(texts.back(), "    size: 100\n", "    size: 7\n"));

  std::vector<Version> versions;
  for (size_t i = 0; i < texts.size(); ++i) {
    Version v;
    const std::string n = std::to_string(i + 1);
    v.file = testing::WriteTempFile("v" + n + ".yaml", texts[i]);
    v.replay_file = testing::WriteTempFile(
        "replay-v" + n + ".yaml",
        Replaced(texts[i], "schema: " + schema + "\n", "schema: " + replay_schema + "\n"));
    v.config = Load(v.file);
    v.replay_config = Load(v.replay_file);
    versions.push_back(std::move(v));
  }
  return versions;
}

// The random article log, published in order; remembers what it published
// (the log a fresh replay must reproduce). One thread at a time.
class Publisher {
 public:
  Publisher(std::string config_file, std::vector<std::string> lines)
      : config_file_(std::move(config_file)), lines_(std::move(lines)) {}

  // The next `n` lines (fewer at the end; none left: false).
  bool PublishNext(size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    if (next_ >= lines_.size()) return false;
    const size_t end = std::min(lines_.size(), next_ + n);
    std::string chunk;
    for (size_t i = next_; i < end; ++i) chunk += lines_[i] + "\n";
    std::string output;
    const int code =
        RunDenormd({"publish", "-c", config_file_, testing::WriteTempFile("chunk.jsonl", chunk)},
                   &output);
    EXPECT_EQ(0, code) << output;
    if (code != 0) return false;
    log_ += chunk;
    published_ += end - next_;
    next_ = end;
    return true;
  }
  // More events to reach every partition: the next ones, or when the log is
  // all out the first ones again (stale duplicates, in the replayed log too).
  void PublishMore() {
    if (PublishNext(kChunk)) return;
    std::lock_guard<std::mutex> lock(mu_);
    std::string chunk;
    for (size_t i = 0; i < kChunk && i < lines_.size(); ++i) chunk += lines_[i] + "\n";
    std::string output;
    ASSERT_EQ(0, RunDenormd({"publish", "-c", config_file_,
                             testing::WriteTempFile("chunk.jsonl", chunk)},
                            &output))
        << output;
    log_ += chunk;
    published_ += std::min(kChunk, lines_.size());
  }
  size_t published() const { return published_.load(); }
  size_t remaining() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_.size() - next_;
  }
  std::string log() const {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }

 private:
  const std::string config_file_;
  const std::vector<std::string> lines_;
  mutable std::mutex mu_;
  size_t next_ = 0;
  std::string log_;
  std::atomic<size_t> published_{0};
};

// What one statement showed about one change: whether it is consistent with
// the old model throughout, with the new one throughout (both: the data
// cannot tell them apart; neither: a mix, or a document out of date).
struct Observation {
  bool old_ok = false;
  bool new_ok = false;
  std::string detail;
  bool strictly_old() const { return old_ok && !new_ok; }
  bool strictly_new() const { return new_ok && !old_ok; }
};

// Polls the collections every few ms with one statement per change (a
// statement sees one snapshot, and a table swapped by the switch either
// before or after it: it waits for the switch's lock and then reads the
// table the name then means, with a snapshot taken after that).
class SwitchReader {
 public:
  explicit SwitchReader(std::string schema) : s_(std::move(schema)) {}
  ~SwitchReader() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  // A whole round of observations begun after this call.
  std::vector<Observation> NextRound() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = rounds_ + 2;
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(kPatience),
                             [&] { return rounds_ >= target || stop_.load(); }))
        << "the reader is stuck";
    return last_;
  }
  std::vector<std::string> Violations() {
    std::lock_guard<std::mutex> lock(mu_);
    return violations_;
  }
  uint64_t Rounds() {
    std::lock_guard<std::mutex> lock(mu_);
    return rounds_;
  }
  // Rounds that saw the change's old state, and its new state, strictly.
  std::pair<uint64_t, uint64_t> Seen(int change) {
    std::lock_guard<std::mutex> lock(mu_);
    return {old_seen_[change], new_seen_[change]};
  }

 private:
  void Loop() {
    try {
      pqxx::connection connection(testing::TestPostgresUrl());
      while (!stop_.load()) {
        std::vector<Observation> round;
        for (int change = 0; change < kChanges; ++change) {
          round.push_back(Observe(connection, change));
        }
        std::lock_guard<std::mutex> lock(mu_);
        for (int change = 0; change < kChanges; ++change) {
          const Observation& o = round[change];
          const std::string what = "change " + std::to_string(change + 1) + ", round " +
                                   std::to_string(rounds_) + ": " + o.detail;
          if (!o.old_ok && !o.new_ok && violations_.size() < 50) {
            violations_.push_back("neither all old nor all new: " + what);
          }
          if (o.strictly_old() && new_seen_[change] > 0 && violations_.size() < 50) {
            violations_.push_back("old again after new: " + what);
          }
          if (o.strictly_old()) ++old_seen_[change];
          if (o.strictly_new()) ++new_seen_[change];
        }
        last_ = std::move(round);
        ++rounds_;
        cv_.notify_all();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu_);
      violations_.push_back(std::string("the reader failed: ") + e.what());
      stop_.store(true);
      cv_.notify_all();
    }
  }

  // Runs `sql` (one statement); its first row's columns as numbers. False
  // when a table it names does not exist.
  static bool Numbers(pqxx::connection& connection, const std::string& sql,
                      std::vector<uint64_t>* out) {
    out->clear();
    try {
      pqxx::nontransaction work(connection);
      pqxx::result result = work.exec(sql);
      for (const auto& field : result[0]) {
        out->push_back(field.is_null() ? 0 : std::strtoull(field.c_str(), nullptr, 10));
      }
      return true;
    } catch (const pqxx::undefined_table&) {
      return false;
    }
  }

  static std::string Join(const std::vector<uint64_t>& numbers) {
    std::string out;
    for (uint64_t n : numbers) out += (out.empty() ? "" : "/") + std::to_string(n);
    return out;
  }

  Observation Observe(pqxx::connection& connection, int change) {
    const std::string& s = s_;
    std::vector<uint64_t> n;
    Observation o;
    switch (change) {
      case 0: {
        // posts.recentComments gains createdAt. Old: no element has the
        // key. New: every element has the comment's createdAt, as the
        // comment entity holds it in the same snapshot (absent when the
        // comment has none). Elements: total, without the key, as the entity.
        Numbers(connection,
                "with el as (select e.value v from " + s + ".posts p cross join lateral"
                " jsonb_array_elements(coalesce(p.doc->'recentComments', '[]'::jsonb)) e)"
                " select count(*), count(*) filter (where not v ? 'createdAt'),"
                " count(*) filter (where (v->'createdAt') is not distinct from"
                " (select c.data->'createdAt' from " + s + ".entities c"
                " where c.type = 'comment' and c.id = v->>'id' and not c.deleted)) from el",
                &n);
        o.old_ok = n[1] == n[0];
        o.new_ok = n[2] == n[0];
        o.detail = "posts.recentComments elements total/without createdAt/as the entity " +
                   Join(n);
        break;
      }
      case 1: {
        // book_titles is added. Old: no such table. New: exactly one
        // document per book document, with the same name (both from the
        // book entities: a partial build or a lagging table differs).
        if (!Numbers(connection,
                     "select count(*) filter (where b.id is null or t.id is null or"
                     " (t.doc->'name') is distinct from (b.doc->'name')), count(*) from " + s +
                         ".books b full join " + s + ".book_titles t on t.id = b.id",
                     &n)) {
          o.old_ok = true;
          o.detail = "no book_titles";
          break;
        }
        o.new_ok = n[0] == 0;
        o.detail = "book_titles unmatched/total " + Join(n);
        break;
      }
      case 2: {
        // authors.books: ids (strings) become embedded books {id, name}.
        // Old: every element a string. New: every element an object with the
        // book entity's name of the same snapshot.
        Numbers(connection,
                "with el as (select e.value v from " + s + ".authors a cross join lateral"
                " jsonb_array_elements(coalesce(a.doc->'books', '[]'::jsonb)) e)"
                " select count(*), count(*) filter (where jsonb_typeof(v) = 'string'),"
                " count(*) filter (where jsonb_typeof(v) = 'object' and (v->'name') is not"
                " distinct from (select b.data->'name' from " + s + ".entities b"
                " where b.type = 'book' and b.id = v->>'id' and not b.deleted)) from el",
                &n);
        o.old_ok = n[1] == n[0];
        o.new_ok = n[2] == n[0];
        o.detail = "authors.books elements total/ids/embedded as the entity " + Join(n);
        break;
      }
      case 3: {
        // portfolios is removed. Old: one portfolio per person document (same
        // first name). New: no such table.
        if (!Numbers(connection,
                     "select count(*) filter (where p.id is null or f.id is null or"
                     " (f.doc->'firstName') is distinct from (p.doc->'firstName')), count(*)"
                     " from " + s + ".people p full join " + s + ".portfolios f on f.id = p.id",
                     &n)) {
          o.new_ok = true;
          o.detail = "no portfolios";
          break;
        }
        o.old_ok = n[0] == 0;
        o.detail = "portfolios unmatched/total " + Join(n);
        break;
      }
      default: {
        // post_comments: size 100 -> 7 (stable layout: every bucket holds 1
        // to size items, all but a group's last at least half of size). So a
        // group of more than 7 comments has a bucket of more than 7 under
        // size 100 (its only one, or a non-last one of >= 50), and none under
        // size 7. Old: no group of more than 7 items without such a bucket.
        // New: no bucket of more than 7. Both: every bucket within 1..100.
        // Counted: buckets > 7, groups > 7 all in buckets <= 7, buckets out
        // of 1..100, buckets.
        Numbers(connection,
                "with b as (select doc->>'postId' g, jsonb_array_length(doc->'comments') n"
                " from " + s + ".post_comments)"
                " select (select count(*) from b where n > 7),"
                " (select count(*) from (select g from b group by g"
                " having sum(n) > 7 and max(n) <= 7) x),"
                " (select count(*) from b where n is null or n < 1 or n > 100),"
                " (select count(*) from b)",
                &n);
        o.old_ok = n[1] == 0 && n[2] == 0;
        o.new_ok = n[0] == 0 && n[2] == 0;
        o.detail = "post_comments buckets >7/split groups/out of range/total " + Join(n);
        break;
      }
    }
    return o;
  }

  const std::string s_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t rounds_ = 0;
  std::vector<Observation> last_;
  std::vector<std::string> violations_;
  uint64_t old_seen_[kChanges] = {};
  uint64_t new_seen_[kChanges] = {};
};

// The daemon's log says it loaded the store's model of `epoch`.
bool Reloaded(const DaemonProcess& daemon, uint64_t epoch) {
  return daemon.Log().find("event=config_loaded_from_store epoch=" + std::to_string(epoch) +
                           " ") != std::string::npos;
}

std::vector<std::string> JsonStrings(const JsonValue& object, const char* key) {
  std::vector<std::string> out;
  if (!object.IsObject() || !object.HasMember(key) || !object[key].IsArray()) return {"(missing)"};
  for (const JsonValue& item : object[key].GetArray()) {
    out.push_back(item.IsString() ? item.GetString() : "(not a string)");
  }
  return out;
}

// The tables of a schema (collections and denormd's own), by name.
std::vector<std::string> Tables(const std::string& schema) {
  return Sql("select table_name from information_schema.tables where table_schema = '" + schema +
             "' order by 1");
}

// The live documents against a fresh replay of everything published, with
// the same config on another schema. Exact, except that in `stable` bucket
// collections (post_comments keeps the default layout, which is what most
// stores run) which bucket holds which member may differ between a store
// maintained live and a fresh replay: there each group's items read in seq
// order must be equal and both sides keep the bucket invariants
// (DiffDocumentSets, as `denormd test --expect` compares).
void CompareWithReplay(const Version& v, const std::string& log, const std::string& label) {
  const std::string live = v.config.store.schema, fresh = v.replay_config.store.schema;
  Sql("drop schema if exists " + fresh + " cascade");
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v.replay_file,
                           testing::WriteTempFile("published.jsonl", log)},
                          &output))
      << output;
  DocumentSet actual = EmptyDocumentSet(v.config);
  actual.collections = testing::ReadCollections(v.config);
  DocumentSet expected = EmptyDocumentSet(v.config);
  expected.collections = testing::ReadCollections(v.replay_config);
  std::string differences;
  for (const std::string& line : DiffDocumentSets(actual, expected)) differences += line + "\n";
  EXPECT_EQ("", differences) << label;
  // No table left over (a dropped collection, a __next or __plan table),
  // none missing.
  EXPECT_EQ(Tables(fresh), Tables(live)) << label;
  // Every event counted once: as the replay counted them.
  const std::string counts = "select sum(applied), sum(stale), sum(dead) from ";
  EXPECT_EQ(Sql(counts + fresh + ".positions"), Sql(counts + live + ".positions")) << label;
  EXPECT_EQ(Sql("select count(*) from " + fresh + ".dead_letters"),
            Sql("select count(*) from " + live + ".dead_letters"))
      << label;
}

TEST(ApplyKafka, FiveModelChangesWhileEventsFlowThroughTwoInstances) {
  const auto start = std::chrono::steady_clock::now();
  auto Elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const std::string schema = testing::TestSchemaName();
  const std::string replay_schema = schema.substr(0, 60) + "_r";
  const std::string topic = schema + "_" + std::to_string(getpid());
  const std::string brokers = testing::TestKafkaBootstrap();
  Sql("drop schema if exists " + schema + " cascade");
  Sql("drop schema if exists " + replay_schema + " cascade");
  const std::string v1 = testing::ReadFile(
      testing::WriteKafkaArticleConfig(schema, brokers, topic));
  const std::vector<Version> versions = Versions(schema, replay_schema, v1);
  ASSERT_EQ(6u, versions.size());
  ASSERT_FALSE(HasFailure());
  {
    std::string output;
    ASSERT_EQ(0, testing::RunScript("kafka.sh", {"topic-create", topic, "4"},
                                    {{"DENORMD_KAFKA_PORT",
                                      brokers.substr(brokers.rfind(':') + 1)}},
                                    &output))
        << output;
  }
  std::vector<std::string> lines =
      Lines(testing::ReadFile(SourcePath("tests/data/article/events-random.jsonl")));
  ASSERT_GT(lines.size(), kInitialEvents + 500);
  Publisher publisher(versions[0].file, lines);

  // Two instances of one group with v1, on four partitions; small batches,
  // so that many commit while an apply builds, catches up and switches.
  const std::vector<std::string> run = {"run", "-c", versions[0].file, "--batch-size", "10"};
  DaemonProcess a(run, testing::TestPostgresUrl());
  DaemonProcess b(run, testing::TestPostgresUrl());
  a.Start();
  b.Start();
  ASSERT_TRUE(publisher.PublishNext(kInitialEvents));
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(schema) >= publisher.published(); }, kPatience))
      << a.Log() << b.Log();
  ASSERT_EQ(std::vector<std::string>({"1"}),
            Sql("select value from " + schema + ".meta where key = 'epoch'"));

  std::cout << "[ info     ] " << kInitialEvents << " events applied at " << Elapsed() << " s\n";
  SwitchReader reader(schema);
  reader.Start();
  for (int change = 0; change < kChanges; ++change) {
    const Version& current = versions[change];
    const Version& next = versions[change + 1];
    const uint64_t epoch = change + 2;  // v1 is epoch 1
    const std::string label = "change " + std::to_string(change + 1) + " (" + next.file + ")";
    SCOPED_TRACE(label);

    // plan: nothing with the file in force (0), changes with the next (3).
    testing::CommandResult plan = testing::RunDenormdWith(
        {{"DENORMD_POSTGRES", testing::TestPostgresUrl()}}, {"plan", "-c", current.file});
    EXPECT_EQ(0, plan.code) << plan.out << plan.err;
    EXPECT_NE(std::string::npos, plan.out.find("nothing to change")) << plan.out;
    plan = testing::RunDenormdWith({{"DENORMD_POSTGRES", testing::TestPostgresUrl()}},
                                   {"plan", "-c", next.file});
    EXPECT_EQ(3, plan.code) << plan.out << plan.err;

    // Before: the reader sees the old model (and tells it from the new).
    std::vector<Observation> before = reader.NextRound();
    ASSERT_EQ(static_cast<size_t>(kChanges), before.size());
    EXPECT_TRUE(before[change].strictly_old()) << before[change].detail;

    // apply while a publisher sends chunk after chunk.
    std::atomic<bool> applied{false};
    std::atomic<int> chunks{0};
    std::thread sender([&] {
      while (!applied.load() && publisher.PublishNext(kChunk)) {
        ++chunks;
        std::this_thread::sleep_for(std::chrono::milliseconds(kChunkPauseMs));
      }
    });
    struct StopSending {  // also when a statement below throws
      std::atomic<bool>& applied;
      std::thread& sender;
      ~StopSending() {
        applied.store(true);
        if (sender.joinable()) sender.join();
      }
    } stop_sending{applied, sender};
    EXPECT_TRUE(WaitUntil([&] { return chunks.load() >= 1; }, kPatience));
    // An apply of this size takes a few hundred ms, in which batches may or
    // may not commit. So that some always do between `applying` being
    // recorded and the build (journaled, then caught up), the build is held
    // back until the journal has rows: apply's store for the new tables
    // creates them under the schema's advisory lock (as any start does;
    // PostgresStore::CreateTables), which this session holds meanwhile.
    // Running instances do not take it (their tables exist). Only for a
    // change that builds a table (4 only drops one).
    const bool builds = change != 3;
    pqxx::connection holder(testing::TestPostgresUrl());
    const std::string schema_lock = std::to_string(LockRowId("denormd schema " + schema));
    if (builds) {
      pqxx::nontransaction(holder).exec("select pg_advisory_lock(" + schema_lock + ")");
    }
    const uint64_t processed_before = EventsProcessed(schema);
    testing::CommandResult apply;
    std::atomic<bool> apply_done{false};
    std::thread applier([&] {
      apply = testing::RunDenormdWith({{"DENORMD_POSTGRES", testing::TestPostgresUrl()}},
                                      {"apply", "-c", next.file, "--json"});
      apply_done.store(true);
    });
    if (builds) {
      EXPECT_TRUE(WaitUntil(
          [&] {
            return apply_done.load() ||
                   SqlCount("select count(*) from " + schema + ".apply_journal") > 0;
          },
          kPatience));
      pqxx::nontransaction(holder).exec("select pg_advisory_unlock(" + schema_lock + ")");
    }
    applier.join();
    const uint64_t processed_after = EventsProcessed(schema);
    applied.store(true);
    sender.join();
    ASSERT_EQ(0, apply.code) << apply.out << apply.err;

    // The report.
    JsonDocument report;
    ASSERT_TRUE(ParseJson(apply.out, &report).ok()) << apply.out;
    ASSERT_TRUE(report.IsObject()) << apply.out;
    EXPECT_EQ(epoch - 1, report["from_epoch"].GetUint64()) << apply.out;
    EXPECT_EQ(epoch, report["to_epoch"].GetUint64()) << apply.out;
    EXPECT_TRUE(report["changes"].GetBool()) << apply.out;
    const JsonValue& documents = report["documents"];
    const std::vector<std::string> rebuilt = JsonStrings(report, "collections_rebuilt");
    const std::vector<std::string> dropped = JsonStrings(report, "collections_dropped");
    const std::vector<std::string> relations_added = JsonStrings(report, "relations_added");
    const std::vector<std::string> none;
    const char* const rebuilt_by_change[] = {"posts", "book_titles", "authors", nullptr,
                                             "post_comments"};
    if (rebuilt_by_change[change] != nullptr) {
      const std::string collection = rebuilt_by_change[change];
      EXPECT_EQ(std::vector<std::string>({collection}), rebuilt) << apply.out;
      EXPECT_EQ(none, dropped) << apply.out;
      ASSERT_TRUE(documents.HasMember(collection.c_str())) << apply.out;
      const JsonValue& counts = documents[collection.c_str()];
      EXPECT_GT(counts["written"].GetUint64(), 0u) << apply.out;
      // (deleted is not asserted: apply counts just before its switch, while
      // batches go on, so a document a batch created after the last catch-up
      // round counts as deleted from the new table; the switch catches it up.)
      EXPECT_FALSE(counts["dropped"].GetBool()) << apply.out;
      if (change == 1) {
        EXPECT_EQ(0u, counts["unchanged"].GetUint64()) << apply.out;  // an added collection
      }
    } else {
      EXPECT_EQ(none, rebuilt) << apply.out;
      EXPECT_EQ(std::vector<std::string>({"portfolios"}), dropped) << apply.out;
      ASSERT_TRUE(documents.HasMember("portfolios")) << apply.out;
      EXPECT_EQ(1u, documents["portfolios"]["deleted"].GetUint64()) << apply.out;  // one person
      EXPECT_TRUE(documents["portfolios"]["dropped"].GetBool()) << apply.out;
    }
    if (change == 2) {
      EXPECT_EQ(std::vector<std::string>({"book authorIds order name"}), relations_added)
          << apply.out;
    } else {
      EXPECT_EQ(none, relations_added) << apply.out;
    }
    // Batches committed while it built were journaled and caught up.
    if (builds) {
      EXPECT_GT(report["journal_changes"].GetUint64(), 0u) << apply.out;
    }
    std::cout << "[ info     ] change " << change + 1 << ": " << chunks.load()
              << " chunks published while applying; " << processed_after - processed_before
              << " events committed by the instances during the apply; journal_changes "
              << report["journal_changes"].GetUint64() << ", switch_ms "
              << report["switch_ms"].GetDouble() << "\n";

    // Both instances fenced and running the store's new model: a batch of
    // the old epoch is refused only when one comes, so events go on until
    // each has reloaded (every partition gets some in a chunk or two).
    EXPECT_TRUE(WaitUntil(
        [&] {
          if (Reloaded(a, epoch) && Reloaded(b, epoch)) return true;
          publisher.PublishMore();
          return WaitUntil([&] { return Reloaded(a, epoch) && Reloaded(b, epoch); }, 3);
        },
        kPatience))
        << a.Log() << b.Log();
    EXPECT_NE(std::string::npos, (a.Log() + b.Log()).find("event=config_epoch_changed"))
        << a.Log() << b.Log();
    ASSERT_TRUE(a.Running()) << a.Log();
    ASSERT_TRUE(b.Running()) << b.Log();
    ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(schema) >= publisher.published(); }, kPatience))
        << a.Log() << b.Log();
    EXPECT_EQ(publisher.published(), EventsProcessed(schema));  // each event once

    // After: the reader sees the new model; never a mix, never back.
    std::vector<Observation> after = reader.NextRound();
    ASSERT_EQ(static_cast<size_t>(kChanges), after.size());
    EXPECT_TRUE(after[change].strictly_new()) << after[change].detail;
    EXPECT_EQ(std::vector<std::string>(), reader.Violations());

    // apply again: nothing to change; verify clean; status at the new epoch.
    testing::CommandResult again = testing::RunDenormdWith(
        {{"DENORMD_POSTGRES", testing::TestPostgresUrl()}}, {"apply", "-c", next.file});
    EXPECT_EQ(0, again.code) << again.out << again.err;
    EXPECT_NE(std::string::npos, again.out.find("nothing to change")) << again.out;
    std::string output;
    EXPECT_EQ(0, RunDenormd({"verify", "-c", next.file}, &output)) << output;
    EXPECT_NE(std::string::npos, output.find("all documents match")) << output;
    EXPECT_EQ(0, RunDenormd({"status", "-c", next.file}, &output)) << output;
    EXPECT_NE(std::string::npos,
              output.find("projections: epoch " + std::to_string(epoch) + " (fingerprint "))
        << output;
    EXPECT_EQ(std::string::npos, output.find("differs")) << output;

    CompareWithReplay(next, publisher.log(), label);
    if (HasFatalFailure()) return;
    std::cout << "[ info     ] change " << change + 1 << " done at " << Elapsed() << " s\n";
  }

  // The rest of the log under v6, then the whole log against a fresh replay.
  while (publisher.PublishNext(500)) {
  }
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(schema) >= publisher.published(); }, kPatience))
      << a.Log() << b.Log();
  std::cout << "[ info     ] the whole log applied at " << Elapsed() << " s\n";
  const std::vector<Observation> last = reader.NextRound();
  reader.Stop();
  EXPECT_EQ(std::vector<std::string>(), reader.Violations());
  for (int change = 0; change < kChanges; ++change) {
    EXPECT_TRUE(last[change].strictly_new()) << last[change].detail;
  }
  std::cout << "[ info     ] " << reader.Rounds() << " reader rounds; "
            << publisher.published() << " events published; rounds strictly old/new by change:";
  for (int change = 0; change < kChanges; ++change) {
    std::cout << " " << reader.Seen(change).first << "/" << reader.Seen(change).second;
  }
  std::cout << "\n";
  std::string output;
  EXPECT_EQ(0, RunDenormd({"verify", "-c", versions.back().file}, &output)) << output;
  CompareWithReplay(versions.back(), publisher.log(), "the whole log");
  EXPECT_EQ(0, a.Terminate(30)) << a.Log();
  EXPECT_EQ(0, b.Terminate(30)) << b.Log();
  Sql("drop schema if exists " + replay_schema + " cascade");
}

}  // namespace
}  // namespace denormd
