// PostgresStore::Prune and `denormd prune`: what retention removes (old
// tombstones, dead letters by age and beyond the cap, unlocked lock rows,
// zero counters), what it must leave (recent tombstones, rows a running batch
// holds), and that the store stays exact and writable afterwards.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "connectors/postgres_sql.h"
#include "daemon/prune_thread.h"
#include "daemon/replay.h"
#include "formats/decoder.h"
#include "projections/maintenance.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

std::string Upsert(const std::string& type, const std::string& id, int version,
                   const std::string& data) {
  return R"({"type":")" + type + R"(","id":")" + id + R"(","op":"upsert","version":)" +
         std::to_string(version) + R"(,"data":)" + data + "}";
}

std::string Delete(const std::string& type, const std::string& id, int version) {
  return R"({"type":")" + type + R"(","id":")" + id + R"(","op":"delete","version":)" +
         std::to_string(version) + "}";
}

class PruneTest : public ::testing::Test {
 protected:
  PruneTest() : article_([](Config* config) { config->retention = RetentionConfig(); }) {}

  ReplayReport Replay(const std::vector<std::string>& lines) {
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    const std::string path = testing::WriteTempFile("log" + std::to_string(++logs_) + ".jsonl", text);
    ReplayReport report;
    Status status = ReplayLog(article_.decoder, article_.applier, &article_.store, path,
                              ReplayOptions(), &report);
    EXPECT_TRUE(status.ok()) << status.ToString();
    return report;
  }

  uint64_t Count(const std::string& table, const std::string& where = "true") {
    return std::stoull(testing::Sql("select count(*) from " + schema() + "." + table +
                                    " where " + where)[0]);
  }

  std::string Differences() {
    std::vector<std::string> out;
    Status status = Verify(article_.plan, &article_.store, MaintenanceOptions(), &out);
    EXPECT_TRUE(status.ok()) << status.ToString();
    std::string all;
    for (const std::string& line : out) all += line + "\n";
    return all;
  }

  PruneReport Prune(const RetentionConfig& retention, size_t chunk_rows = 3) {
    PruneReport report;
    Status status = article_.store.Prune(retention, chunk_rows, &report, nullptr, nullptr);
    EXPECT_TRUE(status.ok()) << status.ToString();
    return report;
  }

  const std::string& schema() const { return article_.config.store.schema; }

  testing::ArticleOnPostgres article_;
  int logs_ = 0;
};

TEST_F(PruneTest, RemovesOnlyWhatRetentionNoLongerKeeps) {
  // Two authors, books that reference them; then the books of a1 and two of
  // the authors are deleted, and three lines are malformed.
  Replay({Upsert("author", "a1", 1, R"({"firstName":"A","lastName":"One"})"),
          Upsert("author", "a2", 1, R"({"firstName":"B","lastName":"Two"})"),
          Upsert("author", "a3", 1, R"({"firstName":"C","lastName":"Three"})"),
          Upsert("book", "b1", 1, R"({"name":"x","authorIds":["a1"]})"),
          Upsert("book", "b2", 1, R"({"name":"y","authorIds":["a1","a2"]})"),
          Upsert("book", "b3", 1, R"({"name":"z","authorIds":["a2"]})"),
          "not json", "{\"type\":\"book\"}", "[1,2]"});
  // (Another batch: within one, an index row added and removed nets out.)
  Replay({Delete("book", "b1", 2), Delete("book", "b2", 2), Delete("author", "a3", 2)});
  ASSERT_EQ("", Differences());
  ASSERT_EQ(3u, Count("entities", "deleted"));
  ASSERT_EQ(3u, Count("dead_letters"));
  ASSERT_GT(Count("ref_counts", "count = 0"), 0u);  // a1 has no books left
  ASSERT_GT(Count("locks"), 0u);
  const uint64_t live = Count("entities", "not deleted");

  // b1 and a3 were deleted two days ago, b2 an hour ago; two dead letters
  // are 40 days old.
  testing::Sql("update " + schema() + ".entities set updated_at = now() - interval '2 days'"
               " where id in ('b1', 'a3')");
  testing::Sql("update " + schema() + ".entities set updated_at = now() - interval '1 hour'"
               " where id = 'b2'");
  testing::Sql("update " + schema() + ".dead_letters set received_at = now() - interval '40 days'"
               " where seq in (select seq from " + schema() + ".dead_letters order by seq limit 2)");

  RetentionConfig retention;
  retention.tombstone_hours = 24;
  retention.dead_letter_days = 30;
  retention.max_dead_letters = 0;
  const uint64_t zero_counts = Count("ref_counts", "count = 0");
  const uint64_t lock_rows = Count("locks");
  PruneReport report = Prune(retention);  // chunks of 3 rows: many chunks each
  EXPECT_EQ(2u, report.tombstones);
  EXPECT_EQ(2u, report.dead_letters);
  EXPECT_EQ(zero_counts, report.zero_counts);
  EXPECT_EQ(lock_rows, report.lock_rows);
  EXPECT_EQ(1u, Count("entities", "deleted"));  // b2's, younger than a day
  EXPECT_EQ(1u, Count("entities", "id = 'b2' and deleted"));
  EXPECT_EQ(live, Count("entities", "not deleted"));
  EXPECT_EQ(1u, Count("dead_letters"));
  EXPECT_EQ(0u, Count("ref_counts", "count = 0"));
  EXPECT_EQ(0u, Count("locks"));
  EXPECT_EQ("", Differences());

  // Nothing left to remove: a second prune removes nothing.
  EXPECT_EQ(0u, Prune(retention).total());

  // The store keeps working: lock rows and counters come back as needed.
  Replay({Upsert("book", "b4", 1, R"({"name":"w","authorIds":["a1","a2"]})"),
          Delete("book", "b3", 2)});
  EXPECT_EQ("", Differences());
  EXPECT_GT(Count("locks"), 0u);
}

// A prune removes every lock row no batch holds. The batches after it lock
// their keys at once: the statement that locks a key creates its row when it
// is missing. (Until lock rows were created in the batch's own statement, a
// connection remembered which rows existed, and the first batch after a prune
// failed on a row gone and was retried.)
TEST_F(PruneTest, BatchesAfterAPruneOfLockRowsRunAtTheirFirstAttempt) {
  std::vector<RawRecord> created;
  for (int i = 1; i <= 20; ++i) {
    created.push_back(testing::LogRecord(
        {"file:locks", 0, i},
        Upsert("author", "a" + std::to_string(i), 1, R"({"firstName":"A","lastName":"L"})")));
  }
  BatchStats stats;
  ASSERT_TRUE(article_.applier.Apply(&article_.store, DecodeBatch(article_.decoder, created), &stats)
                  .ok());
  const uint64_t lock_rows = Count("locks");
  ASSERT_GE(lock_rows, 20u);  // a row per author at least
  RetentionConfig retention;
  EXPECT_EQ(lock_rows, Prune(retention).lock_rows);
  ASSERT_EQ(0u, Count("locks"));

  for (int author = 1; author <= 20; ++author) {
    const EventBatch rename = DecodeBatch(
        article_.decoder, {testing::LogRecord({"file:locks", 0, 20 + author},
                                              Upsert("author", "a" + std::to_string(author), 2,
                                                     R"({"firstName":"B","lastName":"L"})"))});
    BatchStats one;
    const Status status = article_.applier.Apply(&article_.store, rename, &one);
    EXPECT_TRUE(status.ok()) << "author a" << author << ": " << status.ToString();
    EXPECT_EQ(0u, one.busy_retries) << "author a" << author;
  }
  EXPECT_EQ("", Differences());
  EXPECT_EQ(20u, Count("entities", "type = 'author' and data->>'firstName' = 'B'"));
  EXPECT_GE(Count("locks"), 20u);  // created again
}

// Batches between the chunks of a prune (chunks of 3 rows, each removing rows
// across the key space a batch's keys spread over) are never refused. (When
// a connection remembered its lock rows, each batch that met a row a chunk had
// removed failed and was retried: the soak saw up to four retries in a row per
// prune in chunks of 10,000.)
TEST_F(PruneTest, BatchesBetweenAPrunesChunksAreNeverRetried) {
  // a1 and 20 books of it: renaming a1 locks the author and the 20 books'
  // documents, keys spread over the lock rows' key space.
  std::vector<std::string> lines = {Upsert("author", "a1", 1, R"({"firstName":"A","lastName":"L"})")};
  for (int i = 1; i <= 20; ++i) {
    lines.push_back(
        Upsert("book", "b" + std::to_string(i), 1, R"({"name":"x","authorIds":["a1"]})"));
  }
  Replay(lines);
  const uint64_t lock_rows = Count("locks");
  ASSERT_GE(lock_rows, 21u);

  int version = 1, refused = 0, batches = 0;
  const auto rename_a1 = [&](const PruneReport&) {
    ++version;
    const EventBatch batch = DecodeBatch(
        article_.decoder,
        {testing::LogRecord({"file:beside", 0, version},
                            Upsert("author", "a1", version,
                                   R"({"firstName":"V)" + std::to_string(version) +
                                       R"(","lastName":"L"})"))});
    BatchStats stats;
    Status status = article_.applier.Apply(&article_.store, batch, &stats);
    for (int attempt = 0; status.IsTransient() && attempt < 10; ++attempt) {
      ++refused;
      status = article_.applier.Apply(&article_.store, batch, &stats);
    }
    EXPECT_TRUE(status.ok()) << status.ToString();
    refused += static_cast<int>(stats.busy_retries);
    ++batches;
  };
  RetentionConfig retention;
  retention.tombstone_hours = 0;
  PruneReport report;
  ASSERT_TRUE(article_.store.Prune(retention, 3, &report, rename_a1, nullptr).ok());
  EXPECT_GE(report.lock_rows, 3u);
  EXPECT_GE(batches, 2);  // at least one batch ran before the lock rows went, one after
  EXPECT_EQ(0, refused);
  EXPECT_EQ("", Differences());
  EXPECT_EQ(1u, Count("entities", "type = 'author' and data->>'firstName' = 'V" +
                                      std::to_string(version) + "'"));
}

// A batch that needs a lock row a prune's chunk is removing, at that moment,
// waits for the chunk to commit and creates the row again: it is not refused.
// (It was, when a batch locked only rows that existed: the row it waited for
// was gone, and the whole batch ran again.)
TEST_F(PruneTest, ABatchWaitsForTheChunkRemovingItsLockRowAndIsNotRetried) {
  Replay({Upsert("author", "a1", 1, R"({"firstName":"A","lastName":"L"})"),
          Upsert("book", "b1", 1, R"({"name":"x","authorIds":["a1"]})")});
  const std::string a1_row = std::to_string(LockRowId(EntityLockKey("author", "a1")));
  ASSERT_EQ(1u, Count("locks", "key = " + a1_row));

  // A chunk in flight: a1's lock row deleted, not yet committed.
  pqxx::connection chunk(testing::TestPostgresUrl());
  pqxx::work removing(chunk);
  removing.exec("delete from " + schema() + ".locks where key = " + a1_row);
  const std::string xid = removing.exec1("select txid_current()")[0].c_str();

  Status status;
  BatchStats stats;
  std::thread batch = testing::ApplyOnThread(
      article_,
      {testing::LogRecord({"file:beside", 0, 3},
                          Upsert("author", "a1", 2, R"({"firstName":"B","lastName":"L"})"))},
      &status, &stats);
  // The batch waits for the chunk's transaction.
  const bool waits = testing::WaitUntil([&] { return testing::SomeoneWaitsFor(xid); }, 60);
  removing.commit();
  batch.join();
  ASSERT_TRUE(waits) << "the batch never waited for the chunk";
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(0u, stats.busy_retries);
  EXPECT_EQ(1u, Count("locks", "key = " + a1_row));  // created again
  EXPECT_EQ("", Differences());
  EXPECT_EQ(1u, Count("entities", "type = 'author' and data->>'firstName' = 'B'"));
}

TEST(RetentionForPruneAt, SweepsTombstonesOnceAnHourAndTheRestEveryInterval) {
  RetentionConfig retention;
  retention.tombstone_hours = 168;
  retention.interval_s = 300;
  retention.dead_letter_days = 7;
  const auto now = std::chrono::steady_clock::now();
  const auto at = [&](std::chrono::minutes ago) {
    return RetentionForPruneAt(retention, now - ago, now);
  };
  // Never swept: this prune sweeps.
  EXPECT_EQ(168u, RetentionForPruneAt(retention, {}, now).tombstone_hours);
  // Swept 5 and 59 minutes ago: not this time; the rest as configured.
  EXPECT_EQ(0u, at(std::chrono::minutes(5)).tombstone_hours);
  EXPECT_EQ(0u, at(std::chrono::minutes(59)).tombstone_hours);
  EXPECT_EQ(300u, at(std::chrono::minutes(59)).interval_s);
  EXPECT_EQ(7u, at(std::chrono::minutes(59)).dead_letter_days);
  // An hour ago: again.
  EXPECT_EQ(168u, at(std::chrono::minutes(60)).tombstone_hours);
}

TEST_F(PruneTest, TheTombstoneHorizonIsWhereAnOlderEventStopsBeingRefused) {
  Replay({Upsert("author", "a1", 1, R"({"firstName":"A","lastName":"One"})"),
          Delete("author", "a1", 3)});
  // Within the horizon, an event older than the delete is stale.
  ReplayReport late = Replay({Upsert("author", "a1", 2, R"({"firstName":"Late","lastName":"X"})")});
  EXPECT_EQ(1u, late.stats.stale);
  EXPECT_EQ(0u, Count("authors"));

  RetentionConfig retention;
  retention.tombstone_hours = 1;
  EXPECT_EQ(0u, Prune(retention).tombstones);  // the delete is too recent
  testing::Sql("update " + schema() + ".entities set updated_at = now() - interval '2 hours'");
  EXPECT_EQ(1u, Prune(retention).tombstones);
  // Past it, the tombstone is gone and the same late event applies: the
  // documented cost of a horizon shorter than redelivery can be.
  late = Replay({Upsert("author", "a1", 2, R"({"firstName":"Late","lastName":"X"})")});
  EXPECT_EQ(0u, late.stats.stale);
  EXPECT_EQ(1u, Count("authors"));
  EXPECT_EQ("", Differences());
}

TEST_F(PruneTest, DeadLettersBeyondTheCapGoOldestFirst) {
  std::vector<std::string> lines;
  for (int i = 0; i < 7; ++i) lines.push_back("bad line " + std::to_string(i));
  Replay(lines);
  ASSERT_EQ(7u, Count("dead_letters"));
  RetentionConfig retention;
  retention.tombstone_hours = 0;
  retention.dead_letter_days = 0;
  retention.max_dead_letters = 2;
  EXPECT_EQ(5u, Prune(retention).dead_letters);
  // The two newest are kept: the last two lines of the log.
  std::vector<std::string> kept =
      testing::Sql("select convert_from(raw, 'UTF8') from " + schema() +
                   ".dead_letters order by seq");
  EXPECT_EQ((std::vector<std::string>{"bad line 5", "bad line 6"}), kept);
}

TEST_F(PruneTest, RowsARunningBatchHoldsAreLeftAlone) {
  Replay({Upsert("author", "a1", 1, R"({"firstName":"A","lastName":"One"})"),
          Upsert("book", "b1", 1, R"({"name":"x","authorIds":["a1"]})")});
  Replay({Delete("book", "b1", 2)});
  ASSERT_EQ(1u, Count("ref_counts", "count = 0"));
  const uint64_t lock_rows = Count("locks");
  ASSERT_GT(lock_rows, 1u);
  // Another session holds one lock row and the zero counter, as a batch in
  // flight would.
  pqxx::connection other(testing::TestPostgresUrl());
  pqxx::work held(other);
  held.exec("select 1 from " + schema() + ".locks where key = (select min(key) from " + schema() +
            ".locks) for update");
  held.exec("select 1 from " + schema() + ".ref_counts where count = 0 for update");
  PruneReport report = Prune(RetentionConfig());
  EXPECT_EQ(lock_rows - 1, report.lock_rows);
  EXPECT_EQ(0u, report.zero_counts);
  EXPECT_EQ(1u, Count("locks"));
  EXPECT_EQ(1u, Count("ref_counts", "count = 0"));
  held.commit();
  report = Prune(RetentionConfig());
  EXPECT_EQ(1u, report.lock_rows);
  EXPECT_EQ(1u, report.zero_counts);
}

TEST_F(PruneTest, AStopRequestEndsThePruneBetweenChunks) {
  std::vector<std::string> lines;
  for (int i = 0; i < 10; ++i) lines.push_back("bad " + std::to_string(i));
  Replay(lines);
  RetentionConfig retention;
  retention.tombstone_hours = 0;
  retention.dead_letter_days = 0;
  retention.max_dead_letters = 1;
  int chunks = 0;
  PruneReport report;
  Status status = article_.store.Prune(
      retention, 2, &report, [&](const PruneReport&) { ++chunks; }, [&] { return chunks >= 2; });
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(4u, report.dead_letters);  // two chunks of two
  EXPECT_EQ(6u, Count("dead_letters"));
}

TEST(PruneCommand, PrintsWhatItRemoved) {
  Config config;
  const std::string file = testing::ArticleConfigFile(&config);
  std::string output;
  ASSERT_EQ(0, testing::RunDenormd({"replay", "-c", file,
                                    testing::SourcePath("tests/data/article/events.jsonl")},
                                   &output))
      << output;
  ASSERT_EQ(0, testing::RunDenormd({"prune", "-c", file}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("prune: 0 tombstones older than 168 h, ")) << output;
  EXPECT_NE(std::string::npos, output.find(" lock rows, ")) << output;
  EXPECT_EQ(2, testing::RunDenormd({"prune", "-c", file, "extra"}, &output)) << output;
}

// What prune does not do: the tables whose rows churn (the reference index,
// its counters, the lock table) are created with autovacuum settings that
// vacuum them after 1 % dead rows, unthrottled, instead of PostgreSQL's 20 %
// (bench/run.py --soak-minutes measured the difference). The outbox's:
// outbox_postgres_test.
TEST_F(PruneTest, TheChurningTablesAreVacuumedEarly) {
  for (const char* table : {"refs", "ref_counts"}) {
    EXPECT_EQ(testing::StorageOptions(schema() + "." + table), testing::kChurnTableOptions)
        << table;
  }
  // The lock table has no TOAST table (a bigint column only).
  const std::string churn = testing::kChurnTableOptions;
  EXPECT_EQ(testing::StorageOptions(schema() + ".locks"), churn.substr(0, churn.find('|') + 2));
  // The others keep PostgreSQL's defaults.
  EXPECT_EQ(testing::StorageOptions(schema() + ".entities"), " | ");
}

}  // namespace
}  // namespace denormd
