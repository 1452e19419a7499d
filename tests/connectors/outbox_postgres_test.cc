// The change outbox on PostgreSQL: captured in the batch's statements, read
// by snapshot windows, pruned, claimed by one relay. The relay publishes to a
// sink of the test's own, so that what PostgreSQL does is all that is tested:
// the classic outbox pitfall (a seq taken by a transaction that commits after
// a higher one) and relay crashes between any two steps.
#include <memory>
#include <random>

#include <gtest/gtest.h>

#include "connectors/postgres_outbox.h"
#include "daemon/feed_relay.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::FeedReplica;
using testing::SourcePath;
using testing::Sql;

void AddFeed(Config* config) {
  FeedConfig feed;
  feed.topic = "documents";
  feed.brokers = "unused:1";
  feed.transactional_id = "denormd-feed-test";
  feed.progress_topic = "denormd-feed-test.progress";
  feed.max_messages = 9;
  config->feed = feed;
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

// The article engine on PostgreSQL with every collection published, and a
// relay over the PostgreSQL outbox into a fake sink.
struct PostgresFeed {
  PostgresFeed()
      : engine(AddFeed),
        outbox(engine.config, engine.config.store.postgres) {
    NewRelay();
  }
  void NewRelay() {
    relay = std::make_unique<FeedRelay>(engine.config, &outbox, &sink, FeedRelayHooks());
    started = false;
  }
  void Apply(const std::vector<std::string>& lines) {
    std::vector<RawRecord> records;
    for (const std::string& line : lines) {
      records.push_back(testing::LogRecord({"log", 0, ++position}, line));
    }
    BatchStats stats;
    Status status = engine.applier.Apply(&engine.store, DecodeBatch(engine.decoder, records), &stats);
    ASSERT_TRUE(status.ok()) << status.ToString();
  }
  Status Round(size_t* published) {
    *published = 0;
    if (!started) {
      bool active = false;
      DENORMD_RETURN_IF_ERROR(relay->Start(&active));
      EXPECT_TRUE(active);
      started = true;
    }
    Status status = relay->Step(published);
    if (!status.ok()) started = false;
    return status;
  }
  uint64_t OutboxRows() {
    OutboxLag lag;
    EXPECT_TRUE(outbox.Lag(&lag).ok());
    return lag.rows;
  }
  void Drain() {
    for (int round = 0; round < 10000; ++round) {
      size_t published = 0;
      Status status = Round(&published);
      if (status.ok() && published == 0 && OutboxRows() == 0) return;
    }
    ADD_FAILURE() << "the relay did not drain the outbox";
  }
  FeedReplica Replica() const {
    FeedReplica replica;
    for (const testing::FeedRecord& record : sink.records) replica.Apply(record);
    return replica;
  }
  void ExpectExactFeed() {
    FeedReplica replica = Replica();
    EXPECT_EQ("", replica.Diff(testing::FeedExpectation(engine.config)));
    EXPECT_EQ(0u, replica.duplicates());
    EXPECT_EQ(0u, replica.reorders());
    EXPECT_TRUE(replica.Gaps().empty());
    EXPECT_EQ(replica.records(), replica.max_sequence());
    EXPECT_EQ(0u, OutboxRows());
  }

  testing::ArticleOnPostgres engine;
  PostgresOutbox outbox;
  testing::FakeFeedSink sink;
  std::unique_ptr<FeedRelay> relay;
  bool started = false;
  int64_t position = 0;
};

// The random stream in random batches on PostgreSQL, the relay running
// between them with sink failures and relay crashes, as in the memory test.
TEST(OutboxPostgresTest, TheFeedEqualsTheTablesThroughFaults) {
  PostgresFeed f;
  std::mt19937 random(7);
  std::vector<std::string> lines = Lines("events-random.jsonl");
  int faults = 0;
  for (size_t i = 0; i < lines.size();) {
    const size_t n = 1 + random() % 60;
    f.Apply(std::vector<std::string>(lines.begin() + i, lines.begin() + std::min(lines.size(), i + n)));
    i += n;
    for (int round = random() % 3; round > 0; --round) {
      switch (random() % 8) {
        case 0: f.sink.fail_before_commit = 1; ++faults; break;
        case 1: f.sink.fail_after_commit = 1; ++faults; break;
        case 2: f.NewRelay(); ++faults; break;
        default: break;
      }
      size_t published = 0;
      f.Round(&published).IgnoreError();  // a failure ends the session; the next round starts again
    }
  }
  f.Drain();
  EXPECT_GT(faults, 20);
  f.ExpectExactFeed();
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(f.engine.config),
                                         SourcePath("tests/data/article/expected-random.json")));
}

// A transaction takes a seq, a later one takes a higher seq and commits
// first: a relay that reads "seq > last published" would skip the first
// change for good. Snapshot windows publish it when it commits.
// Every row of the outbox is deleted once published: it is vacuumed after 1 %
// dead rows, unthrottled (connectors/postgres_store.cc, kChurnTableStorage).
TEST(OutboxPostgresTest, TheOutboxIsVacuumedEarly) {
  PostgresFeed feed;
  EXPECT_EQ(testing::StorageOptions(feed.engine.config.store.schema + ".outbox"),
            testing::kChurnTableOptions);
}

TEST(OutboxPostgresTest, ASeqCommittedAfterAHigherOneIsStillPublishedOnce) {
  PostgresFeed f;
  PostgresStore other(f.engine.config, f.engine.config.store.postgres);
  ASSERT_TRUE(other.Open().ok());
  const ProjectionConfig& stocks = *f.engine.config.FindProjection("stocks");
  uint64_t written = 0;

  std::unique_ptr<StoreTransaction> early;
  ASSERT_TRUE(f.engine.store.Begin(&early).ok());
  early->SetChangeSource("early");
  ASSERT_TRUE(early->documents().Upsert(stocks, {{"s1", std::nullopt, R"({"id":"s1"})", std::nullopt}}, &written).ok());

  std::unique_ptr<StoreTransaction> late;
  ASSERT_TRUE(other.Begin(&late).ok());
  late->SetChangeSource("late");
  ASSERT_TRUE(late->documents().Upsert(stocks, {{"s2", std::nullopt, R"({"id":"s2"})", std::nullopt}}, &written).ok());
  ASSERT_TRUE(late->Commit().ok());
  std::vector<std::string> seqs = Sql("select id, seq from " + f.engine.config.store.schema +
                                      ".outbox order by seq");
  ASSERT_EQ(1u, seqs.size());  // the early one is not visible yet
  EXPECT_EQ(0u, seqs[0].find("s2\t"));

  size_t published = 0;
  ASSERT_TRUE(f.Round(&published).ok());
  ASSERT_EQ(1u, published);
  EXPECT_EQ("s2", f.sink.records[0].key);
  // The relay crashes here; a new one starts from what the sink committed.
  f.NewRelay();
  ASSERT_TRUE(f.Round(&published).ok());
  EXPECT_EQ(0u, published);

  ASSERT_TRUE(early->Commit().ok());
  seqs = Sql("select id, seq from " + f.engine.config.store.schema + ".outbox order by seq");
  ASSERT_EQ(1u, seqs.size());  // s2 was pruned; s1 has the lower seq
  f.Drain();
  ASSERT_EQ(2u, f.sink.records.size());
  EXPECT_EQ("s1", f.sink.records[1].key);
  EXPECT_EQ("early", f.sink.records[1].Header(kFeedSourceHeader));
  EXPECT_EQ("2", f.sink.records[1].Header(kFeedSequenceHeader));
  f.ExpectExactFeed();
}

// Rolled back: never visible, never published.
TEST(OutboxPostgresTest, ARolledBackChangeIsNeverPublished) {
  PostgresFeed f;
  const ProjectionConfig& stocks = *f.engine.config.FindProjection("stocks");
  uint64_t written = 0;
  {
    std::unique_ptr<StoreTransaction> txn;
    ASSERT_TRUE(f.engine.store.Begin(&txn).ok());
    ASSERT_TRUE(txn->documents().Upsert(stocks, {{"s9", std::nullopt, R"({"id":"s9"})", std::nullopt}}, &written).ok());
  }
  f.Apply({R"({"type": "stock", "id": "s1", "op": "upsert", "data": {"p": 1}})"});
  f.Drain();
  ASSERT_EQ(1u, f.sink.records.size());
  EXPECT_EQ("s1", f.sink.records[0].key);
  f.ExpectExactFeed();
}

// Captured in the same statements: only rows that changed, deletes as
// tombstones, a partition-key move as a delete of the old key, a bucket
// re-spacing as changes of every bucket of the group.
TEST(OutboxPostgresTest, OnlyRowsThatChangedAreCaptured) {
  PostgresFeed f;
  const std::string outbox = f.engine.config.store.schema + ".outbox";
  f.Apply({R"({"type": "review", "id": "r1", "op": "upsert", "data": {"bookId": "b1", "x": 1}})"});
  EXPECT_EQ(std::vector<std::string>({"catalog\tr1\tb1\tf\tlog/0@1"}),
            Sql("select collection, id, pk, doc is null, source from " + outbox));
  f.Drain();
  f.Apply({R"({"type": "review", "id": "r1", "op": "upsert", "data": {"bookId": "b1", "x": 1}, "version": 5})"});
  EXPECT_TRUE(Sql("select 1 from " + outbox).empty());  // the same document: nothing
  f.Apply({R"({"type": "review", "id": "r1", "op": "upsert", "data": {"bookId": "b2"}})"});
  EXPECT_EQ(std::vector<std::string>({"catalog\tr1\tb1\tt", "catalog\tr1\tb2\tf"}),
            Sql("select collection, id, pk, doc is null from " + outbox + " order by seq"));
  f.Apply({R"({"type": "review", "id": "r1", "op": "delete"})"});
  EXPECT_EQ("catalog\tr1\tb2\tt",
            Sql("select collection, id, pk, doc is null from " + outbox + " order by seq desc limit 1")[0]);
  f.Drain();
  f.ExpectExactFeed();
  FeedReplica replica = f.Replica();
  EXPECT_EQ(4u, replica.records());

  // Ten full buckets of a post's comments, seq 0..9; a comment into the
  // middle splits a bucket where no seq is free between its neighbours: the
  // buckets on the shorter side of the gap are re-spaced, and every bucket
  // whose seq changed is a change (3 re-spaced, then the split's 2).
  std::vector<std::string> comments = {R"({"type": "post", "id": "p1", "op": "upsert", "data": {}})"};
  for (int i = 0; i < 1000; ++i) {
    comments.push_back(R"({"type": "comment", "id": "c)" + std::to_string(i) +
                       R"(", "op": "upsert", "data": {"postId": "p1", "createdAt": )" +
                       std::to_string(i) + "}}");
  }
  f.Apply(comments);
  f.Drain();
  f.Apply({R"({"type": "comment", "id": "x", "op": "upsert", "data": {"postId": "p1", "createdAt": 250.5}})"});
  EXPECT_EQ(std::vector<std::string>({"5"}),
            Sql("select count(*) from " + outbox + " where collection = 'post_comments'"));
  f.Drain();
  f.ExpectExactFeed();
}

TEST(OutboxPostgresTest, OneRelayPerStoreAndStatusShowsTheLag) {
  PostgresFeed f;
  PostgresOutbox second(f.engine.config, f.engine.config.store.postgres);
  bool claimed = false;
  ASSERT_TRUE(f.outbox.Claim(&claimed).ok());
  EXPECT_TRUE(claimed);
  ASSERT_TRUE(second.Claim(&claimed).ok());
  EXPECT_FALSE(claimed);

  f.Apply({R"({"type": "stock", "id": "s1", "op": "upsert", "data": {"p": 1}})",
           R"({"type": "stock", "id": "s2", "op": "upsert", "data": {"p": 1}})"});
  StoreSummary summary;
  ASSERT_TRUE(f.engine.store.Summarize(&summary).ok());
  EXPECT_TRUE(summary.feed);
  EXPECT_EQ(2u, summary.outbox.rows);
  EXPECT_GT(summary.outbox.oldest_seconds, 0);
  EXPECT_EQ("", summary.feed_relay);
  OutboxLag lag;
  ASSERT_TRUE(second.Lag(&lag).ok());  // any instance can tell
  EXPECT_EQ(2u, lag.rows);

  f.Drain();
  summary = StoreSummary();
  ASSERT_TRUE(f.engine.store.Summarize(&summary).ok());
  EXPECT_EQ(0u, summary.outbox.rows);
  EXPECT_EQ("denormd-feed-test", summary.feed_relay);
  EXPECT_EQ(2u, summary.feed_sequence);

  // The first relay goes away (its connection ends; the server notices at
  // once, but not synchronously): the second takes over.
  f.outbox.Disconnect();
  EXPECT_TRUE(testing::WaitUntil([&] { return second.Claim(&claimed).ok() && claimed; }, 30));
  std::vector<OutboxRow> rows;
  OutboxCursor next;
  EXPECT_TRUE(f.outbox.Read({}, 10, &rows, &next).IsTransient());  // not claimed any more
}

// issue 25: a forged record on the feed's progress topic made the relay
// prune the whole outbox. The relay cross-checks the record with the store
// before it prunes anything, refuses loudly on a disagreement, and goes on
// once the feed's real progress is back.
TEST(OutboxPostgresTest, AProgressRecordTheStoreDisagreesWithPrunesNothing) {
  PostgresFeed f;
  std::vector<std::string> lines = Lines("events.jsonl");
  const size_t half = lines.size() / 2;
  f.Apply(std::vector<std::string>(lines.begin(), lines.begin() + half));
  f.Drain();
  ASSERT_TRUE(f.sink.committed_progress.has_value());
  const FeedProgress real = *f.sink.committed_progress;
  ASSERT_GT(real.sequence, 0u);
  f.Apply(std::vector<std::string>(lines.begin() + half, lines.end()));
  const uint64_t waiting = f.OutboxRows();
  ASSERT_GT(waiting, 0u);
  const size_t published = f.sink.records.size();

  const std::vector<std::pair<FeedProgress, std::string>> forged = {
      // A cursor from the future (another store's, or made up).
      {{{"1:4000000000:", "1:4000000000:", 0}, real.sequence + 1000},
       "after every transaction the store has begun"},
      // Behind what the store recorded as published.
      {{real.cursor, 0}, "behind the " + std::to_string(real.sequence)},
      // Not a snapshot at all.
      {{{"everything", "", 0}, real.sequence}, "not a snapshot of the store"},
  };
  for (const auto& c : forged) {
    SCOPED_TRACE(c.second);
    f.sink.committed_progress = c.first;
    f.NewRelay();
    size_t n = 0;
    Status status = f.Round(&n);
    ASSERT_FALSE(status.ok());
    EXPECT_NE(std::string::npos, status.message().find("disagrees with the store")) << status.message();
    EXPECT_NE(std::string::npos, status.message().find(c.second)) << status.message();
    EXPECT_EQ(waiting, f.OutboxRows());
    EXPECT_EQ(published, f.sink.records.size());
    EXPECT_EQ(std::vector<std::string>{std::to_string(real.sequence)},
              Sql("select sequence from " + f.engine.config.store.schema + ".feed_state"));
  }
  // The real progress back: everything is published, exactly once.
  f.sink.committed_progress = real;
  f.NewRelay();
  f.Drain();
  f.ExpectExactFeed();
}
}  // namespace
}  // namespace denormd
