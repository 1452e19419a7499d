// The change feed in process: the memory store captures document changes in
// its outbox, the relay publishes them to a sink of the test's own, and a
// consumer's copy of the feed must equal the collections — through sink
// failures before and after a commit, relay crashes between any two steps,
// oversized documents, partition-key moves and rollbacks.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <random>

#include <gtest/gtest.h>

#include "daemon/feed_relay.h"
#include "formats/decoder.h"
#include "projections/maintenance.h"
#include "projections/memory_store.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::FeedRecord;
using testing::FeedReplica;
using testing::SourcePath;

Config ArticleWithFeed(const std::string& feed_yaml) {
  std::string text = testing::ReadFile(SourcePath("tests/data/article/config.yaml")) + feed_yaml;
  std::vector<ConfigError> errors;
  std::optional<Config> config = ParseConfig(text, "article+feed.yaml", &errors);
  for (const ConfigError& e : errors) ADD_FAILURE() << e.ToString("article+feed.yaml");
  return config.value_or(Config());
}

std::vector<std::string> Lines(const std::string& file) {
  std::vector<std::string> out;
  std::string text = testing::ReadFile(SourcePath("tests/data/article/" + file));
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// The engine on a MemoryStore that captures every published collection,
// with its outbox, a fake sink and a relay that can be "killed".
struct FeedHarness {
  explicit FeedHarness(Config config_in)
      : config(std::move(config_in)), plan(config), applier(plan), decoder(config), outbox(&store) {
    store.PublishCollections(config.PublishedCollections());
    NewRelay();
  }

  // A relay process that starts from nothing but the sink and the outbox.
  void NewRelay() {
    FeedRelayHooks hooks;
    hooks.on_published = [this](uint64_t published, uint64_t too_large,
                                const std::vector<double>&, double) {
      published_total += published;
      too_large_total += too_large;
    };
    relay = std::make_unique<FeedRelay>(config, &outbox, &sink, hooks);
    started = false;
  }

  void Apply(const std::vector<std::string>& lines) {
    std::vector<RawRecord> records;
    for (const std::string& line : lines) {
      records.push_back(testing::LogRecord({"log", 0, ++position}, line));
    }
    BatchStats stats;
    Status status = applier.Apply(&store, DecodeBatch(decoder, records), &stats);
    ASSERT_TRUE(status.ok()) << status.ToString();
  }

  // One round of what FeedRelay::Run does: start if needed, one step; an
  // error ends the session (the next round starts again).
  Status Round(size_t* published) {
    *published = 0;
    if (!started) {
      bool active = false;
      Status status = relay->Start(&active);
      if (!status.ok()) return status;
      EXPECT_TRUE(active);
      started = true;
    }
    Status status = relay->Step(published);
    if (!status.ok()) started = false;
    return status;
  }

  // Rounds until the outbox is empty and a round publishes nothing.
  void Drain() {
    for (int round = 0; round < 10000; ++round) {
      size_t published = 0;
      Status status = Round(&published);
      if (status.ok() && published == 0 && store.state().outbox.empty()) return;
    }
    ADD_FAILURE() << "the relay did not drain the outbox";
  }

  FeedReplica Replica() const {
    FeedReplica replica;
    for (const FeedRecord& record : sink.records) replica.Apply(record);
    return replica;
  }

  Config config;
  ProjectionPlan plan;
  BatchApplier applier;
  NativeDecoder decoder;
  MemoryStore store;
  MemoryOutbox outbox;
  testing::FakeFeedSink sink;
  std::unique_ptr<FeedRelay> relay;
  bool started = false;
  int64_t position = 0;
  uint64_t published_total = 0;
  uint64_t too_large_total = 0;
};

void ExpectExactFeed(const FeedHarness& h) {
  FeedReplica replica = h.Replica();
  EXPECT_EQ("", replica.Diff(testing::FeedExpectation(h.config, h.store.state())));
  EXPECT_EQ(0u, replica.duplicates());
  EXPECT_EQ(0u, replica.reorders());
  EXPECT_TRUE(replica.Gaps().empty());
  EXPECT_EQ(replica.records(), replica.max_sequence());
  ASSERT_TRUE(h.sink.committed_progress.has_value());
  EXPECT_EQ(h.sink.committed_progress->sequence, replica.max_sequence());
  EXPECT_TRUE(h.store.state().outbox.empty());
}

class FeedScenarioTest : public ::testing::TestWithParam<testing::ArticleScenario> {};

TEST_P(FeedScenarioTest, TheFeedEqualsTheCollections) {
  const testing::ArticleScenario& scenario = GetParam();
  FeedHarness h(ArticleWithFeed("feed: {topic: article.documents, brokers: b:1, max_messages: 7}\n"));
  std::vector<std::string> lines = Lines(scenario.events);
  for (size_t i = 0; i < lines.size(); i += scenario.batch_size) {
    h.Apply(std::vector<std::string>(lines.begin() + i,
                                     lines.begin() + std::min(lines.size(), i + scenario.batch_size)));
    if (i % (3 * scenario.batch_size) == 0) {
      size_t published = 0;
      ASSERT_TRUE(h.Round(&published).ok());
    }
  }
  h.Drain();
  ExpectExactFeed(h);
  EXPECT_EQ(0u, h.too_large_total);
  // Every published collection is on the feed, the collections are what the
  // scenario expects, and the feed carries where each change came from.
  FeedReplica replica = h.Replica();
  EXPECT_EQ(9u, replica.documents().size());
  for (const FeedRecord& record : h.sink.records) {
    ASSERT_EQ(0u, record.Header(kFeedSourceHeader).rfind("log/0@", 0)) << record.Header(kFeedSourceHeader);
    EXPECT_EQ("article.documents", record.topic);
  }
}

INSTANTIATE_TEST_SUITE_P(Article, FeedScenarioTest,
                         ::testing::ValuesIn(testing::AllArticleScenarios()),
                         [](const auto& info) { return testing::ArticleScenarioName(info.param); });

// The random stream in random batches; between batches the relay runs a few
// rounds, and any round may hit a sink failure before the commit, one after
// it (the outcome unknown to the relay), or a crash of the relay process
// (all its memory lost) — before publishing, or after a commit and before
// the outbox was pruned.
TEST(FeedRelayTest, FaultsAtEveryStepNeitherLoseNorRepeatAChange) {
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    FeedHarness h(ArticleWithFeed("feed: {topic: t, brokers: b:1, max_messages: 5}\n"));
    std::mt19937 random(seed);
    std::vector<std::string> lines = Lines("events-random.jsonl");
    int faults = 0;
    for (size_t i = 0; i < lines.size();) {
      const size_t n = 1 + random() % 40;
      h.Apply(std::vector<std::string>(lines.begin() + i, lines.begin() + std::min(lines.size(), i + n)));
      i += n;
      for (int round = random() % 4; round > 0; --round) {
        switch (random() % 10) {
          case 0: h.sink.fail_before_commit = 1; ++faults; break;
          case 1: h.sink.fail_after_commit = 1; ++faults; break;
          case 2: h.NewRelay(); ++faults; break;  // crashed before this round
          default: break;
        }
        size_t published = 0;
        Status status = h.Round(&published);
        if (!status.ok()) {
          EXPECT_TRUE(status.IsTransient()) << status.ToString();
        }
        if (random() % 10 == 0) {  // crashed right after this round (committed, maybe unpruned)
          h.NewRelay();
          ++faults;
        }
      }
    }
    h.Drain();
    EXPECT_GT(faults, 50);
    ExpectExactFeed(h);
    EXPECT_GT(h.sink.opens, 50);
  }
}

TEST(FeedRelayTest, ABatchWritesADocumentOnceAndSaysWhereItCameFrom) {
  FeedHarness h(ArticleWithFeed("feed: {collections: {authors: a}, brokers: b:1}\n"));
  h.Apply({R"({"type": "author", "id": "a1", "op": "upsert", "data": {"firstName": "A"}})",
           R"({"type": "author", "id": "a1", "op": "patch", "data": {"firstName": "B"}})",
           R"({"type": "author", "id": "a1", "op": "patch", "data": {"lastName": "C"}})",
           R"({"type": "book", "id": "b1", "op": "upsert", "data": {"authorIds": ["a1"]}})"});
  // Coalesced: one change of authors/a1 (books is not published).
  ASSERT_EQ(1u, h.store.state().outbox.size());
  const OutboxRow& row = h.store.state().outbox[0];
  EXPECT_EQ("authors", row.collection);
  EXPECT_EQ("a1", row.id);
  EXPECT_EQ("log/0@4", row.source);
  h.Drain();
  ASSERT_EQ(1u, h.sink.records.size());
  const FeedRecord& record = h.sink.records[0];
  EXPECT_EQ("a", record.topic);
  EXPECT_EQ("a1", record.key);
  EXPECT_EQ("1", record.Header(kFeedSequenceHeader));
  EXPECT_EQ("authors", record.Header(kFeedCollectionHeader));
  EXPECT_EQ("log/0@4", record.Header(kFeedSourceHeader));
  ExpectExactFeed(h);
  // Nothing changed, nothing captured; a delete is a tombstone.
  h.Apply({R"({"type": "author", "id": "a1", "op": "patch", "data": {"lastName": "C"}})"});
  EXPECT_TRUE(h.store.state().outbox.empty());
  h.Apply({R"({"type": "author", "id": "a1", "op": "delete"})"});
  h.Drain();
  ASSERT_EQ(2u, h.sink.records.size());
  EXPECT_FALSE(h.sink.records[1].value.has_value());
  EXPECT_EQ("2", h.sink.records[1].Header(kFeedSequenceHeader));
  ExpectExactFeed(h);
}

TEST(FeedRelayTest, APartitionKeyMoveDeletesTheOldKey) {
  FeedHarness h(ArticleWithFeed("feed: {collections: {catalog: c}, brokers: b:1}\n"));
  h.Apply({R"({"type": "review", "id": "r1", "op": "upsert", "data": {"bookId": "b1"}})"});
  h.Apply({R"({"type": "review", "id": "r1", "op": "upsert", "data": {"bookId": "b2"}})"});
  h.Drain();
  ASSERT_EQ(3u, h.sink.records.size());
  EXPECT_EQ(R"(["b1","r1"])", h.sink.records[0].key);
  EXPECT_TRUE(h.sink.records[0].value.has_value());
  EXPECT_EQ(R"(["b1","r1"])", h.sink.records[1].key);
  EXPECT_FALSE(h.sink.records[1].value.has_value());
  EXPECT_EQ(R"(["b2","r1"])", h.sink.records[2].key);
  ExpectExactFeed(h);
  // A document without the partition key has pk null.
  h.Apply({R"({"type": "review", "id": "r2", "op": "upsert", "data": {"content": "x"}})"});
  h.Drain();
  EXPECT_EQ(R"([null,"r2"])", h.sink.records.back().key);
  ExpectExactFeed(h);
}

TEST(FeedRelayTest, ARolledBackTransactionLeavesNothingInTheOutbox) {
  FeedHarness h(ArticleWithFeed("feed: {topic: t, brokers: b:1}\n"));
  h.Apply({R"({"type": "stock", "id": "s1", "op": "upsert", "data": {"p": 1}})"});
  ASSERT_EQ(1u, h.store.state().outbox.size());
  {
    std::unique_ptr<StoreTransaction> txn;
    ASSERT_TRUE(h.store.Begin(&txn).ok());
    uint64_t written = 0;
    ASSERT_TRUE(txn->documents()
                    .Upsert(*h.config.FindProjection("stocks"), {{"s2", std::nullopt, R"({"id":"s2"})", std::nullopt}},
                            &written)
                    .ok());
    EXPECT_EQ(2u, h.store.state().outbox.size());
    // The relay does not read while a transaction is open...
    std::vector<OutboxRow> rows;
    OutboxCursor next;
    EXPECT_TRUE(h.outbox.Read({}, 10, &rows, &next).IsBusy());
  }  // ...which then rolls back.
  EXPECT_EQ(1u, h.store.state().outbox.size());
  h.Drain();
  ASSERT_EQ(1u, h.sink.records.size());
  EXPECT_EQ("s1", h.sink.records[0].key);
  ExpectExactFeed(h);
}

TEST(FeedRelayTest, OversizedDocumentsBecomeMarkersAndNothingStalls) {
  // A post's comment bucket grows past 1 KiB: published as a marker.
  FeedHarness h(ArticleWithFeed("feed: {topic: t, brokers: b:1, max_message_bytes: 1024}\n"));
  std::vector<std::string> events;
  events.push_back(R"({"type": "post", "id": "p1", "op": "upsert", "data": {"title": "T"}})");
  for (int i = 0; i < 30; ++i) {
    events.push_back(R"({"type": "comment", "id": "c)" + std::to_string(i) +
                     R"(", "op": "upsert", "data": {"postId": "p1", "createdAt": )" +
                     std::to_string(i) + R"(, "author": "someone", "comment": "a comment that takes some room"}})");
  }
  h.Apply(events);
  // And the sink refuses anything over 600 bytes (a broker's topic limit).
  h.sink.refuse_larger_than = 600;
  h.Apply({R"({"type": "stock", "id": "s1", "op": "upsert", "data": {"text": ")" +
           std::string(620, 'x') + R"("}})"});
  h.Apply({R"({"type": "stock", "id": "s2", "op": "upsert", "data": {"p": 2}})"});
  h.Drain();
  FeedReplica replica = h.Replica();
  EXPECT_EQ(0u, replica.duplicates());
  EXPECT_TRUE(replica.Gaps().empty());
  EXPECT_EQ(2u, replica.too_large());
  EXPECT_EQ(2u, h.too_large_total);
  const std::string& bucket = replica.documents().at("post_comments").at("p1:0");
  EXPECT_NE(std::string::npos, bucket.find(R"({"denormd_too_large":{"collection":"post_comments","id":"p1:0","bytes":)"))
      << bucket;
  EXPECT_NE(std::string::npos, replica.documents().at("stocks").at("s1").find("denormd_too_large"));
  EXPECT_EQ(R"({"p":2,"id":"s2"})", replica.documents().at("stocks").at("s2"));
  EXPECT_TRUE(h.store.state().outbox.empty());
}

TEST(FeedRelayTest, RebuildPublishesWhatItRepairs) {
  FeedHarness h(ArticleWithFeed("feed: {topic: t, brokers: b:1}\n"));
  h.Apply({R"({"type": "stock", "id": "s1", "op": "upsert", "data": {"p": 1}})"});
  h.Drain();
  // An edit behind denormd's back, which rebuild repairs: the repair is a change.
  h.store.mutable_state()->collections["stocks"]["s1"].json = R"({"id":"s1","p":0})";
  BatchStats stats;
  ASSERT_TRUE(Rebuild(h.plan, &h.store, MaintenanceOptions(), &stats).ok());
  ASSERT_EQ(1u, h.store.state().outbox.size());
  EXPECT_EQ("rebuild", h.store.state().outbox[0].source);
  h.Drain();
  EXPECT_EQ("rebuild", h.sink.records.back().Header(kFeedSourceHeader));
  ExpectExactFeed(h);
}

// issue 25: a progress record the store disagrees with (a cursor past the
// outbox, a sequence behind the one the store recorded) prunes nothing.
TEST(FeedRelayTest, AProgressRecordTheStoreDisagreesWithPrunesNothing) {
  FeedHarness h(ArticleWithFeed("feed: {topic: t, brokers: b:1, max_messages: 5}\n"));
  std::vector<std::string> lines = Lines("events.jsonl");
  const size_t half = lines.size() / 2;
  h.Apply(std::vector<std::string>(lines.begin(), lines.begin() + half));
  h.Drain();
  ASSERT_TRUE(h.sink.committed_progress.has_value());
  const FeedProgress real = *h.sink.committed_progress;
  h.Apply(std::vector<std::string>(lines.begin() + half, lines.end()));
  const size_t waiting = h.store.state().outbox.size();
  ASSERT_GT(waiting, 0u);
  for (const FeedProgress& forged :
       {FeedProgress{{"999999", "999999", 0}, real.sequence + 5}, FeedProgress{real.cursor, 0}}) {
    h.sink.committed_progress = forged;
    h.NewRelay();
    size_t published = 0;
    Status status = h.Round(&published);
    ASSERT_FALSE(status.ok());
    EXPECT_NE(std::string::npos, status.message().find("disagrees with the store"))
        << status.message();
    EXPECT_EQ(waiting, h.store.state().outbox.size());
  }
  h.sink.committed_progress = real;
  h.NewRelay();
  h.Drain();
  ExpectExactFeed(h);
}

// The outbox and the sink of a harness, watched: the sink's Publish waits
// (up to ten seconds) for the relay to read the outbox from the cursor after
// the page it publishes, and says whether it did.
class WatchedOutbox : public ChangeOutbox {
 public:
  explicit WatchedOutbox(ChangeOutbox* outbox) : outbox_(outbox) {}
  Status Claim(bool* claimed) override { return outbox_->Claim(claimed); }
  Status Read(const OutboxCursor& from, size_t max, std::vector<OutboxRow>* rows,
              OutboxCursor* next) override {
    Status status = outbox_->Read(from, max, rows, next);
    std::lock_guard<std::mutex> lock(mutex_);
    read_from_.push_back(from);
    read_.notify_all();
    return status;
  }
  Status Prune(const OutboxCursor& published, uint64_t sequence) override {
    return outbox_->Prune(published, sequence);
  }
  Status CheckProgress(const OutboxCursor& published, uint64_t sequence,
                       std::string* problem) override {
    return outbox_->CheckProgress(published, sequence, problem);
  }
  Status Lag(OutboxLag* out) override { return outbox_->Lag(out); }

  int reads() {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int>(read_from_.size());
  }
  // Whether the outbox is read from `cursor`, after its first `reads`
  // reads, within ten seconds.
  bool ReadFrom(const OutboxCursor& cursor, int reads) {
    std::unique_lock<std::mutex> lock(mutex_);
    return read_.wait_for(lock, std::chrono::seconds(10), [&] {
      return std::find(read_from_.begin() + reads, read_from_.end(), cursor) != read_from_.end();
    });
  }

 private:
  ChangeOutbox* outbox_;
  std::mutex mutex_;
  std::condition_variable read_;
  std::vector<OutboxCursor> read_from_;  // GUARDED_BY(mutex_)
};

class WatchingSink : public FeedSink {
 public:
  WatchingSink(FeedSink* sink, WatchedOutbox* outbox) : sink_(sink), outbox_(outbox) {}
  Status Open(FeedProgress* progress) override { return sink_->Open(progress); }
  Status Publish(const std::vector<FeedMessage>& messages, const FeedProgress& progress,
                 std::vector<int64_t>* too_large) override {
    read_beside.push_back(outbox_->ReadFrom(progress.cursor, reads_before_step));
    // The relay's thread has read the next page and waits for this publish:
    // the test may change the store now.
    if (after_read_beside) after_read_beside();
    return sink_->Publish(messages, progress, too_large);
  }
  void Close() override { sink_->Close(); }

  int reads_before_step = 0;     // set by the test before each Step
  std::vector<bool> read_beside;  // per publish: the page after it was read meanwhile
  std::function<void()> after_read_beside;

 private:
  FeedSink* sink_;
  WatchedOutbox* outbox_;
};

// The relay reads the next page while the broker commits a page (and
// prunes the last one there): a page's time on the relay is its publish, not
// read + publish + prune (docs/benchmarks.md, "The change feed"). A page read
// beside a publish that fails is dropped: the feed stays exact.
TEST(FeedRelayTest, TheNextPageIsReadWhileAPageIsPublished) {
  FeedHarness h(ArticleWithFeed("feed: {topic: t, brokers: b:1, max_messages: 2}\n"));
  WatchedOutbox outbox(&h.outbox);
  WatchingSink sink(&h.sink, &outbox);
  FeedRelay relay(h.config, &outbox, &sink, FeedRelayHooks());
  std::vector<std::string> stocks;
  for (int i = 0; i < 7; ++i) {
    stocks.push_back(R"({"type": "stock", "id": "s)" + std::to_string(i) +
                     R"(", "op": "upsert", "data": {"p": 1}})");
  }
  h.Apply(stocks);
  size_t published = 0;
  auto step = [&] {
    sink.reads_before_step = outbox.reads();
    return relay.Step(&published);
  };
  bool active = false;
  ASSERT_TRUE(relay.Start(&active).ok());
  ASSERT_TRUE(active);
  ASSERT_TRUE(step().ok());  // s0, s1; reads s2, s3 beside
  EXPECT_EQ(2u, published);
  const int reads = outbox.reads();
  ASSERT_TRUE(step().ok());  // s2, s3 as read; reads s4, s5 beside
  EXPECT_EQ(2u, published);
  EXPECT_EQ(reads + 1, outbox.reads()) << "the page was read again, not taken as read ahead";
  // The sink fails the next commit after making it: the page read beside
  // it (s6) is dropped, and the relay starts again from the sink.
  h.sink.fail_after_commit = 1;
  EXPECT_FALSE(step().ok());
  ASSERT_TRUE(relay.Start(&active).ok());
  for (int round = 0; round < 10; ++round) {
    ASSERT_TRUE(step().ok());
    if (published == 0) break;
  }
  EXPECT_EQ(0u, published);
  ASSERT_EQ(4u, sink.read_beside.size());
  for (size_t i = 0; i < sink.read_beside.size(); ++i) {
    EXPECT_TRUE(sink.read_beside[i]) << "publish " << i;
  }
  ExpectExactFeed(h);
}

// A change committed while a page is published, after the page behind it
// was read ahead, joins that page: reading ahead never makes it wait for one
// more Kafka transaction.
TEST(FeedRelayTest, WhatCommitsDuringAPublishJoinsThePageReadAhead) {
  FeedHarness h(ArticleWithFeed("feed: {topic: t, brokers: b:1, max_messages: 3}\n"));
  WatchedOutbox outbox(&h.outbox);
  WatchingSink sink(&h.sink, &outbox);
  FeedRelay relay(h.config, &outbox, &sink, FeedRelayHooks());
  auto stock = [](int i) {
    return R"({"type": "stock", "id": "s)" + std::to_string(i) + R"(", "op": "upsert", "data": {"p": 1}})";
  };
  h.Apply({stock(0), stock(1), stock(2), stock(3)});
  bool active = false;
  ASSERT_TRUE(relay.Start(&active).ok());
  size_t published = 0;
  bool applied = false;
  sink.after_read_beside = [&] {
    if (!applied) h.Apply({stock(4)});  // after s3 was read ahead
    applied = true;
  };
  ASSERT_TRUE(relay.Step(&published).ok());
  EXPECT_EQ(3u, published);  // s0, s1, s2
  ASSERT_TRUE(relay.Step(&published).ok());
  EXPECT_EQ(2u, published) << "s3 as read ahead, and s4";
  EXPECT_EQ(2, h.sink.transactions);
  ASSERT_TRUE(relay.Step(&published).ok());
  EXPECT_EQ(0u, published);
  ExpectExactFeed(h);
}

}  // namespace
}  // namespace denormd
