// The batch loop with several lanes (daemon/batch_loop.h, projections/
// lanes.h) on PostgreSQL: the article's four parts, each applied by its own
// thread and connection, from an event log (the same loop `run` drives from
// Kafka). What is checked is what a user sees: the documents equal the
// article's expected ones (computed apart), every record is counted once,
// stops at random moments and restarts neither lose nor repeat a record,
// a store of a release before lanes resumes where it was, and a lane held
// inside its commit does not hold another lane's batches.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <algorithm>
#include <map>
#include <random>
#include <thread>

#include "connectors/event_log_source.h"
#include "connectors/postgres_admin.h"
#include "daemon/batch_loop.h"
#include "projections/json.h"
#include "projections/lanes.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::SourcePath;
using testing::Sql;

const char kEvents[] = "tests/data/article/events-random.jsonl";
const char kExpected[] = "tests/data/article/expected-random.json";

// The article on the test's schema with a store per lane.
struct LanedArticle {
  LanedArticle() : lanes(Lanes::Of(article.plan, 4)) {
    for (size_t i = 0; i < lanes.size(); ++i) {
      stores.push_back(PostgresStores(testing::TestPostgresUrl())(article.config));
      Status opened = stores.back()->Open();
      EXPECT_TRUE(opened.ok()) << opened.ToString();
    }
  }
  std::vector<Store*> lane_stores() {
    std::vector<Store*> out;
    for (auto& store : stores) out.push_back(store.get());
    return out;
  }

  testing::ArticleOnPostgres article;
  const Lanes lanes;
  std::vector<std::unique_ptr<StoreAdministration>> stores;
};

// Replays `path` through the lanes of `laned`, in batches of at most
// `max_events`; `stop_after` commits (0: none), it asks the loop to stop,
// as SIGTERM does. Returns the commits seen.
size_t ReplayThroughLanes(LanedArticle& laned, const std::string& path, size_t max_events,
                          size_t stop_after, std::vector<Store*> stores = {}) {
  if (stores.empty()) stores = laned.lane_stores();
  EventLogSource log;
  Status opened = log.Open(path, LoadPositionsFrom(laned.article.store), laned.lanes);
  EXPECT_TRUE(opened.ok()) << opened.ToString();
  std::atomic<bool> stopping{false};
  size_t commits = 0;
  BatchLoopHooks hooks;
  hooks.on_commit = [&](const CommittedBatch&) {
    if (++commits == stop_after) stopping.store(true);
  };
  BatchLoopOptions options;
  options.max_events = max_events;
  BatchLoop loop(log, laned.article.decoder, laned.article.applier, stores, nullptr, options,
                 std::move(hooks), stopping);
  Status status = loop.Run();
  EXPECT_TRUE(status.ok()) << status.ToString();
  return commits;
}

std::string Counts(const std::string& schema) {
  return Sql("select sum(applied), sum(stale), sum(dead) from " + schema + ".positions")[0];
}

std::string ExpectedCounts() {
  uint64_t stale = 0, dead = 0;
  testing::ExpectedCounts(SourcePath(kExpected), &stale, &dead);
  uint64_t records = 0;  // the log's lines
  std::ifstream in(SourcePath(kEvents));
  for (std::string line; std::getline(in, line);) records += !line.empty();
  return std::to_string(records - stale - dead) + "\t" + std::to_string(stale) + "\t" +
         std::to_string(dead);
}

TEST(LanesLoop, TheArticleInFourLanesEqualsItsExpectedDocumentsAndCountsEachRecordOnce) {
  LanedArticle laned;
  ASSERT_EQ(4u, laned.lanes.size());
  ReplayThroughLanes(laned, SourcePath(kEvents), 7, 0);
  const std::string& schema = laned.article.config.store.schema;
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(laned.article.config),
                                         SourcePath(kExpected)));
  EXPECT_EQ(ExpectedCounts(), Counts(schema));
  // A row per lane, each of its own types.
  EXPECT_EQ(4u, testing::SqlCount("select count(*) from " + schema + ".positions"));
  // Run again: every lane resumes where it was, and nothing is applied twice.
  ReplayThroughLanes(laned, SourcePath(kEvents), 7, 0);
  EXPECT_EQ(ExpectedCounts(), Counts(schema));
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(laned.article.config),
                                         SourcePath(kExpected)));
}

TEST(LanesLoop, StopsAtRandomCommitsThenRestartsEndExact) {
  LanedArticle laned;
  std::mt19937 random(2718);
  size_t stops = 0;
  for (int round = 0; round < 6; ++round) {
    const size_t after = 5 + random() % 60;
    if (ReplayThroughLanes(laned, SourcePath(kEvents), 1 + random() % 25, after) >= after) {
      ++stops;
    }
  }
  EXPECT_GE(stops, 4u);
  ReplayThroughLanes(laned, SourcePath(kEvents), 40, 0);
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(laned.article.config),
                                         SourcePath(kExpected)));
  EXPECT_EQ(ExpectedCounts(), Counts(laned.article.config.store.schema));
}

TEST(LanesLoop, AStoreOfOneLaneResumesInLanesWhereItWas) {
  LanedArticle laned;
  const std::string& schema = laned.article.config.store.schema;
  // The first 1,000 lines as a release before lanes applied them: one
  // lane, its row of every type, in a positions table of that release.
  const std::string head = ::testing::TempDir() + "lanes_head.jsonl";
  {
    std::ifstream in(SourcePath(kEvents));
    std::ofstream out(head);
    std::string line;
    for (int i = 0; i < 1000 && std::getline(in, line); ++i) out << line << "\n";
  }
  EventLogSource log;
  ASSERT_TRUE(log.Open(head, LoadPositionsFrom(laned.article.store),
                       Lanes::Single(laned.article.config))
                  .ok());
  std::atomic<bool> stopping{false};
  BatchLoop one(log, laned.article.decoder, laned.article.applier, laned.article.store, nullptr,
                BatchLoopOptions(), BatchLoopHooks(), stopping);
  ASSERT_TRUE(one.Run().ok());
  Sql("alter table " + schema + ".positions drop constraint positions_pkey");
  Sql("alter table " + schema + ".positions drop column lane");
  Sql("alter table " + schema + ".positions add primary key (source, partition)");
  Sql("update " + schema + ".positions set source = 'file:" + SourcePath(kEvents) + "'");
  // Opening the store gives the table its lane column and key back.
  for (auto& store : laned.stores) ASSERT_TRUE(store->Open().ok());
  EXPECT_EQ(std::vector<std::string>({"{}\t1000"}),
            Sql("select lane, position from " + schema + ".positions"));
  ReplayThroughLanes(laned, SourcePath(kEvents), 50, 0);
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(laned.article.config),
                                         SourcePath(kExpected)));
  EXPECT_EQ(ExpectedCounts(), Counts(schema));
  // Each lane took the old row's place; the old row stays behind them.
  EXPECT_EQ(std::vector<std::string>({"{}\t1000"}),
            Sql("select lane, position from " + schema + ".positions where lane = '{}'"));
  EXPECT_EQ(0u, testing::SqlCount("select count(*) from " + schema +
                                  ".positions where lane <> '{}' and position < 1000"));
}

// An event log split over partitions by its records' keys (as Kafka's
// producers do), read the way KafkaEventSource reads a topic: from where the
// stored positions say each partition's lanes resume, skipping what a lane
// applied, with the partitions of each poll in a seeded random order.
class PartitionedLog : public EventSource {
 public:
  PartitionedLog(const std::string& path, int partitions, const Lanes& lanes, uint32_t seed)
      : lanes_(lanes), random_(seed), logs_(partitions) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      // Keyed type:id; a line that is not an event goes to partition 0.
      JsonDocument event;
      std::string key;
      if (ParseJson(line, &event).ok() && event.IsObject() && event.HasMember("type") &&
          event["type"].IsString() && event.HasMember("id") && event["id"].IsString()) {
        key = std::string(event["type"].GetString()) + ":" + event["id"].GetString();
      }
      logs_[key.empty() ? 0 : std::hash<std::string>()(key) % partitions].push_back(line);
    }
  }
  Status Open(const PositionLoader& loader) {
    std::vector<int32_t> partitions;
    for (size_t p = 0; p < logs_.size(); ++p) partitions.push_back(static_cast<int32_t>(p));
    DENORMD_RETURN_IF_ERROR(loader("scripted", partitions, lanes_, &progress_));
    next_.assign(logs_.size(), 0);
    for (size_t p = 0; p < logs_.size(); ++p) next_[p] = lanes_.ResumeAfter(progress_[p]) + 1;
    return Status::Ok();
  }
  Status Poll(size_t max, int, int, std::vector<RawRecord>* out) override {
    std::vector<size_t> order(logs_.size());
    for (size_t p = 0; p < order.size(); ++p) order[p] = p;
    std::shuffle(order.begin(), order.end(), random_);
    for (size_t p : order) {
      const size_t chunk = 1 + random_() % 9;
      for (size_t i = 0; i < chunk && out->size() < max && next_[p] < (int64_t)logs_[p].size(); ++i) {
        out->push_back(testing::LogRecord({"scripted", static_cast<int32_t>(p), next_[p]},
                                          logs_[p][next_[p]]));
        ++next_[p];
      }
    }
    return Status::Ok();
  }
  bool Exhausted() const override {
    for (size_t p = 0; p < logs_.size(); ++p) {
      if (next_[p] < static_cast<int64_t>(logs_[p].size())) return false;
    }
    return true;
  }
  const Lanes& lanes() const override { return lanes_; }
  bool Applied(const SourcePosition& at, const std::string& type) const override {
    return at.position <= progress_.at(at.partition).AppliedThrough(type);
  }
  std::vector<SourcePosition> FencingPositions(size_t lane) const override {
    std::vector<SourcePosition> out;
    for (const auto& p : progress_) {
      out.push_back({"scripted", p.first, p.second.RowOf(lanes_.key(lane))});
    }
    return out;
  }
  void MarkCommitted(size_t lane, const std::vector<SourcePosition>& last) override {
    for (const SourcePosition& at : last) progress_[at.partition].SetRow(lanes_.key(lane), at);
  }
  Status Reseek() override { return Status::Conflict("another consumer moved the log"); }

 private:
  const Lanes lanes_;
  std::mt19937 random_;
  std::vector<std::vector<std::string>> logs_;
  std::vector<int64_t> next_;
  std::map<int32_t, StreamProgress> progress_;
};

TEST(LanesLoop, OverPartitionsNoLanesRowGoesBackAndStopsAndRestartsEndExact) {
  LanedArticle laned;
  const std::string& schema = laned.article.config.store.schema;
  std::mt19937 random(31415);
  std::map<std::string, int64_t> highest;  // "<partition> <lane>" -> its row's highest position
  auto check_rows = [&](int round) {
    for (const std::string& row :
         Sql("select partition || ' ' || lane::text, position from " + schema + ".positions")) {
      const size_t tab = row.find('\t');
      const int64_t position = std::stoll(row.substr(tab + 1));
      int64_t& seen = highest.emplace(row.substr(0, tab), -1).first->second;
      EXPECT_GE(position, seen) << "round " << round << ": the row of " << row.substr(0, tab)
                                << " went back";
      seen = std::max(seen, position);
    }
  };
  for (int round = 0; round < 8; ++round) {
    PartitionedLog log(SourcePath(kEvents), 3, laned.lanes, random());
    ASSERT_TRUE(log.Open(LoadPositionsFrom(laned.article.store)).ok());
    std::atomic<bool> stopping{false};
    const size_t stop_after = round == 7 ? 0 : 3 + random() % 40;
    size_t commits = 0;
    BatchLoopHooks hooks;
    hooks.on_commit = [&](const CommittedBatch&) {
      if (++commits == stop_after) stopping.store(true);
    };
    BatchLoopOptions options;
    options.max_events = 1 + random() % 30;
    BatchLoop loop(log, laned.article.decoder, laned.article.applier, laned.lane_stores(),
                   nullptr, options, std::move(hooks), stopping);
    ASSERT_TRUE(loop.Run().ok());
    check_rows(round);
  }
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(laned.article.config),
                                         SourcePath(kExpected)));
  EXPECT_EQ(ExpectedCounts(), Counts(schema));
}

// A store whose first commit waits until `release` says so, or 20 s.
class HeldStore : public Store {
 public:
  explicit HeldStore(Store& inner) : inner_(inner) {}
  Status Begin(std::unique_ptr<StoreTransaction>* out) override {
    std::unique_ptr<StoreTransaction> txn;
    DENORMD_RETURN_IF_ERROR(inner_.Begin(&txn));
    *out = std::make_unique<Held>(std::move(txn), this);
    return Status::Ok();
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    changed_.notify_all();
  }
  bool held() {
    std::lock_guard<std::mutex> lock(mu_);
    return holding_;
  }
  // Whether the held commit went on because of Release (not the timeout).
  bool released_in_time() {
    std::lock_guard<std::mutex> lock(mu_);
    return released_in_time_;
  }

 private:
  class Held : public testing::ForwardingTransaction {
   public:
    Held(std::unique_ptr<StoreTransaction> inner, HeldStore* store)
        : ForwardingTransaction(std::move(inner)), store_(store) {}
    Status Commit() override {
      store_->Hold();
      return ForwardingTransaction::Commit();
    }

   private:
    HeldStore* store_;
  };
  void Hold() {
    std::unique_lock<std::mutex> lock(mu_);
    if (held_once_) return;
    held_once_ = true;
    holding_ = true;
    released_in_time_ =
        changed_.wait_for(lock, std::chrono::seconds(20), [&] { return released_; });
    holding_ = false;
  }

  Store& inner_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool held_once_ = false;
  bool holding_ = false;
  bool released_ = false;
  bool released_in_time_ = false;
};

TEST(LanesLoop, ALaneHeldInItsCommitHoldsNoOtherLanesBatches) {
  LanedArticle laned;
  std::vector<Store*> stores = laned.lane_stores();
  const size_t held_lane = laned.lanes.LaneOf("author");
  const size_t other_lane = laned.lanes.LaneOf("comment");
  ASSERT_NE(held_lane, other_lane);
  HeldStore held(*stores[held_lane]);
  stores[held_lane] = &held;
  EventLogSource log;
  ASSERT_TRUE(log.Open(SourcePath(kEvents), LoadPositionsFrom(laned.article.store), laned.lanes)
                  .ok());
  std::atomic<bool> stopping{false};
  size_t other_commits_while_held = 0;
  BatchLoopHooks hooks;
  hooks.on_commit = [&](const CommittedBatch& batch) {
    // The comments' lane commits while the authors' lane waits in its
    // first commit: only then is that commit let go.
    if (batch.lane == other_lane && held.held() && ++other_commits_while_held == 1) {
      held.Release();
    }
  };
  BatchLoopOptions options;
  options.max_events = 50;
  BatchLoop loop(log, laned.article.decoder, laned.article.applier, stores, nullptr, options,
                 std::move(hooks), stopping);
  ASSERT_TRUE(loop.Run().ok());
  EXPECT_TRUE(held.released_in_time());
  EXPECT_GE(other_commits_while_held, 1u);
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(laned.article.config),
                                         SourcePath(kExpected)));
}

// A store whose every transaction fails to begin with `error`.
class BrokenStore : public Store {
 public:
  explicit BrokenStore(Status error) : error_(std::move(error)) {}
  Status Begin(std::unique_ptr<StoreTransaction>*) override { return error_; }

 private:
  const Status error_;
};

TEST(LanesLoop, ALaneThatFailsEndsTheLoopWhileAnotherRetriesAnOutage) {
  LanedArticle laned;
  std::vector<Store*> stores = laned.lane_stores();
  BrokenStore failing(Status::Fatal("this lane's store is broken"));
  BrokenStore away(Status::Transient("this lane's server is away"));
  stores[laned.lanes.LaneOf("comment")] = &failing;
  stores[laned.lanes.LaneOf("author")] = &away;
  EventLogSource log;
  ASSERT_TRUE(log.Open(SourcePath(kEvents), LoadPositionsFrom(laned.article.store), laned.lanes)
                  .ok());
  std::atomic<bool> stopping{false};
  BatchLoop loop(log, laned.article.decoder, laned.article.applier, stores, nullptr,
                 BatchLoopOptions(), BatchLoopHooks(), stopping);
  // The retrying lane would go on until its server is back; the failure
  // must end the loop without it (the guard below only keeps a broken
  // build from hanging the suite).
  std::atomic<bool> guard_stopped{false};
  std::atomic<bool> done{false};
  std::thread guard([&] {
    for (int i = 0; i < 600 && !done.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!done.load()) {
      guard_stopped.store(true);
      stopping.store(true);
    }
  });
  Status status = loop.Run();
  done.store(true);
  guard.join();
  EXPECT_FALSE(guard_stopped.load());
  EXPECT_FALSE(status.ok());
  EXPECT_NE(std::string::npos, status.message().find("this lane's store is broken"))
      << status.ToString();
}

}  // namespace
}  // namespace denormd
