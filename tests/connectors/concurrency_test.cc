// Concurrent batches on one database never leave a stale copy: threads apply
// book upserts (each embedding copies of a few hot authors) and renames of
// those authors at the same moment, each on its own connection, and then
// verify recomputes every document from the source and finds no difference.
//
// This is the race the two-phase locking of BatchApplier::Apply exists for;
// with LockKeys made a no-op this test fails (checked when it was written).
#include <atomic>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "connectors/postgres_sql.h"
#include "connectors/postgres_store.h"
#include "connectors/postgres_write_locks.h"
#include "projections/lanes.h"
#include "projections/maintenance.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

RawRecord Event(const std::string& source, int64_t position, const std::string& json) {
  return testing::LogRecord({source, 0, position}, json);
}

TEST(Concurrency, HotAuthorsRenamedWhileBooksArriveNeverLeaveStaleCopies) {
  constexpr int kHotAuthors = 4;
  constexpr int kWriters = 3;
  constexpr int kBatchesPerWriter = 60;
  testing::ArticleOnPostgres article;  // creates the schema
  const Config& config = article.config;
  const ProjectionPlan& plan = article.plan;
  const BatchApplier& applier = article.applier;
  std::atomic<int> failures{0};
  std::atomic<int> retries{0};
  auto writer = [&](int w) {
    PostgresStore store(config, config.store.postgres);
    std::mt19937 random(1000 + w);
    std::string source = "race:" + std::to_string(w);
    int64_t position = 0;
    uint64_t author_version = 1;
    for (int b = 0; b < kBatchesPerWriter; ++b) {
      std::vector<RawRecord> raw;
      if (w == 0) {
        // The renamer: every hot author gets a new name in each batch.
        ++author_version;
        for (int a = 0; a < kHotAuthors; ++a) {
          raw.push_back(Event(source, ++position,
                              R"({"type":"author","id":"a)" + std::to_string(a) +
                                  R"(","op":"upsert","version":)" +
                                  std::to_string(author_version) +
                                  R"(,"data":{"firstName":"Name)" +
                                  std::to_string(author_version) + R"(","lastName":"A)" +
                                  std::to_string(a) + R"("}})"));
        }
      } else {
        // The book writers: new books and moves between hot authors.
        for (int i = 0; i < 5; ++i) {
          std::string id = "w" + std::to_string(w) + "b" + std::to_string(random() % 40);
          std::string authors = "\"a" + std::to_string(random() % kHotAuthors) + "\"";
          if (random() % 2) authors += ",\"a" + std::to_string(random() % kHotAuthors) + "\"";
          raw.push_back(Event(source, ++position,
                              R"({"type":"book","id":")" + id +
                                  R"(","op":"upsert","data":{"name":"x","authorIds":[)" +
                                  authors + "]}}"));
        }
      }
      EventBatch batch = DecodeBatch(article.decoder, raw);
      for (int attempt = 0;; ++attempt) {
        BatchStats stats;
        Status status = applier.Apply(&store, batch, &stats);
        if (status.ok()) break;
        if (!status.IsTransient() || attempt > 20) {
          ADD_FAILURE() << status.ToString();
          failures++;
          return;
        }
        retries++;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) threads.emplace_back(writer, w);
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(0, failures.load());

  PostgresStore store(config, config.store.postgres);
  std::vector<std::string> differences;
  ASSERT_TRUE(Verify(plan, &store, MaintenanceOptions(), &differences).ok());
  EXPECT_TRUE(differences.empty()) << differences.size() << " stale documents, first: "
                                   << differences.front();
  // Sanity: the race really happened on shared documents.
  std::vector<std::string> books =
      testing::Sql("select count(*) from " + config.store.schema + ".books");
  ASSERT_EQ(1u, books.size());
  EXPECT_GT(std::stoi(books[0]), 40);
  EXPECT_EQ(0, retries.load()) << "transient errors: the locking must not deadlock";
}

// How many advisory locks of `part` of the article's model (in `schema`)
// are held in `mode` ("ExclusiveLock", "ShareLock"; granted) or waited for.
uint64_t PartLocks(const std::string& schema, const std::string& part, const std::string& mode,
                   bool granted) {
  return testing::SqlCount(
      "select count(*) from pg_locks where locktype = 'advisory' and objsubid = 1"
      " and ((classid::bigint << 32) | objid::bigint) = " +
      std::to_string(PostgresWriteLocks::PartLockId(QuoteIdentifier(schema), part)) +
      " and mode = '" + mode + "' and " + (granted ? "granted" : "not granted"));
}

// Stores author a1 and book b1 (which embeds a1's name) on `stream`.
void StoreAuthorA1AndBookB1(testing::ArticleOnPostgres& article, const std::string& stream) {
  BatchStats stats;
  ASSERT_TRUE(article.applier
                  .Apply(&article.store,
                         DecodeBatch(article.decoder,
                                     {Event(stream, 1,
                                            R"({"type":"author","id":"a1","op":"upsert","version":1,)"
                                            R"("data":{"firstName":"A","lastName":"L"}})"),
                                      Event(stream, 2,
                                            R"({"type":"book","id":"b1","op":"upsert","version":1,)"
                                            R"("data":{"name":"x","authorIds":["a1"]}})")}),
                         &stats)
                  .ok());
}

// Renames a1 (version 2, position 3 of `stream`) on a thread of its own.
std::thread RenameA1OnThread(testing::ArticleOnPostgres& article, const std::string& stream,
                             Status* status, BatchStats* stats) {
  return testing::ApplyOnThread(article,
                                {Event(stream, 3,
                                       R"({"type":"author","id":"a1","op":"upsert","version":2,)"
                                       R"("data":{"firstName":"B","lastName":"L"}})")},
                                status, stats);
}

// Whether a batch runs alone in `part` (its advisory lock held exclusively)
// while someone waits for transaction `xid`: polled until true or 60 s.
bool AloneInPartAndWaitingFor(const std::string& schema, const std::string& part,
                              const std::string& xid) {
  return testing::WaitUntil(
      [&] {
        return PartLocks(schema, part, "ExclusiveLock", /*granted=*/true) > 0 &&
               testing::SomeoneWaitsFor(xid);
      },
      60);
}

// The second phase of a batch waits only briefly for a document's key
// (WriteLocks::Mode::kWaitBriefly): a key another transaction holds longer
// makes the batch roll back and try again at once, alone in its part of the
// model (the part's advisory lock exclusively), waiting for the key. Were the brief wait a full
// one, two batches each holding what the other wants would deadlock; here the
// first attempt would wait for the holder and never be refused.
TEST(Concurrency, ADocumentKeyHeldPastABriefWaitSendsTheBatchToRunAlone) {
  testing::ArticleOnPostgres article;
  const std::string& schema = article.config.store.schema;
  const std::string authors_part = PartOfType(article.plan).at("author");
  ASSERT_NO_FATAL_FAILURE(StoreAuthorA1AndBookB1(article, "brief"));
  // Another transaction holds every key but a1's own: renaming a1 passes its
  // first phase and meets a held key in its second (b1's document, which
  // embeds a1: its key is b1's).
  const std::string a1_row = std::to_string(LockRowId(EntityLockKey("author", "a1")));
  const std::string b1_row = std::to_string(LockRowId(EntityLockKey("book", "b1")));
  pqxx::connection other(testing::TestPostgresUrl());
  pqxx::work holding(other);
  ASSERT_EQ(1u, holding.exec("select key from " + schema + ".locks where key <> " + a1_row +
                             " for update").size());
  ASSERT_EQ(1u, holding.exec("select key from " + schema + ".locks where key = " + b1_row +
                             " for update").size());
  const std::string xid = holding.exec1("select txid_current()")[0].c_str();

  Status status;
  BatchStats renamed;
  std::thread batch = RenameA1OnThread(article, "brief", &status, &renamed);
  // Alone in its part of the model (the part's advisory lock held
  // exclusively), it waits for the holder.
  const bool alone_and_waiting = AloneInPartAndWaitingFor(schema, authors_part, xid);
  holding.commit();
  batch.join();
  ASSERT_TRUE(alone_and_waiting) << "the batch never ran alone waiting for the held keys";
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(1u, renamed.busy_retries);
  // The rolled-back attempt waited out the brief wait (lock_timeout) at least.
  EXPECT_GE(renamed.busy_seconds, PostgresWriteLocks::kBriefLockWaitMs / 1000.0);
  std::vector<std::string> differences;
  ASSERT_TRUE(Verify(article.plan, &article.store, MaintenanceOptions(), &differences).ok());
  EXPECT_TRUE(differences.empty()) << differences.front();
  EXPECT_EQ(1u, testing::SqlCount("select count(*) from " + schema +
                                  ".entities where id = 'a1' and data->>'firstName' = 'B'"));
}

// A batch retried alone is alone in its part of the model only
// (WriteLocks::LockWritersOf): a batch of its part waits for it, a batch of
// another part (a post's comment beside an author's rename) commits while it
// waits. Until lanes had a lock each, the retry held the writers' table
// exclusively and the comment waited too.
TEST(Concurrency, ABatchAloneInItsPartLetsTheOtherPartsCommit) {
  testing::ArticleOnPostgres article;
  const std::string& schema = article.config.store.schema;
  const std::string authors_part = PartOfType(article.plan).at("author");
  ASSERT_NO_FATAL_FAILURE(StoreAuthorA1AndBookB1(article, "part"));
  // Every key but a1's held (as in the test above): the rename of a1 meets
  // b1's in its second phase, and retries alone.
  const std::string a1_row = std::to_string(LockRowId(EntityLockKey("author", "a1")));
  pqxx::connection other(testing::TestPostgresUrl());
  pqxx::work holding(other);
  holding.exec("select key from " + schema + ".locks where key <> " + a1_row + " for update");
  const std::string xid = holding.exec1("select txid_current()")[0].c_str();
  Status renamed_status, book_status, comment_status;
  BatchStats renamed, book, comment;
  std::thread rename = RenameA1OnThread(article, "part", &renamed_status, &renamed);
  const bool alone_and_waiting = AloneInPartAndWaitingFor(schema, authors_part, xid);
  ASSERT_TRUE(alone_and_waiting) << "the rename never ran alone waiting for the held keys";
  // Another part: commits beside it.
  // (Each on a store of its own: a store is one connection.)
  PostgresStore comment_store(article.config, article.config.store.postgres);
  PostgresStore book_store(article.config, article.config.store.postgres);
  std::atomic<bool> comment_done{false};
  std::thread comment_thread([&] {
    comment_status = article.applier.Apply(
        &comment_store,
        DecodeBatch(article.decoder,
                    {Event("other part", 1,
                           R"({"type":"post","id":"p1","op":"upsert","version":1,)"
                           R"("data":{"title":"t"}})"),
                     Event("other part", 2,
                           R"({"type":"comment","id":"m1","op":"upsert","version":1,)"
                           R"("data":{"postId":"p1","createdAt":1}})")}),
        &comment);
    comment_done = true;
  });
  const bool comment_committed_beside = testing::WaitUntil([&] { return comment_done.load(); }, 60);
  // Its own part: waits for it (on the part's advisory lock).
  std::thread book_thread([&] {
    book_status = article.applier.Apply(
        &book_store,
        DecodeBatch(article.decoder, {Event("part", 4,
                                            R"({"type":"book","id":"b2","op":"upsert","version":1,)"
                                            R"("data":{"name":"y","authorIds":["a2"]}})")}),
        &book);
  });
  const bool book_waits = testing::WaitUntil(
      [&] {
        return PartLocks(schema, authors_part, "ShareLock", /*granted=*/false) > 0;
      },
      60);
  holding.commit();
  rename.join();
  comment_thread.join();
  book_thread.join();
  EXPECT_TRUE(comment_committed_beside)
      << "the comment of another part waited for the rename alone in its part";
  EXPECT_TRUE(book_waits) << "a book of the rename's part did not wait for it";
  ASSERT_TRUE(renamed_status.ok()) << renamed_status.ToString();
  ASSERT_TRUE(comment_status.ok()) << comment_status.ToString();
  ASSERT_TRUE(book_status.ok()) << book_status.ToString();
  EXPECT_EQ(1u, renamed.busy_retries);
  std::vector<std::string> differences;
  ASSERT_TRUE(Verify(article.plan, &article.store, MaintenanceOptions(), &differences).ok());
  EXPECT_TRUE(differences.empty()) << differences.front();
  EXPECT_EQ(1u, testing::SqlCount("select count(*) from " + schema + ".entities where type ="
                                  " 'comment' and id = 'm1'"));
}

}  // namespace
}  // namespace denormd
