// How many round trips to PostgreSQL a small batch takes. A batch's writes,
// locks and BEGIN are deferred and sent with its next read (or its COMMIT),
// so its round trips follow its reads, not its statements
// (connectors/postgres_work.h, "Round trips"). Each change below is
// one batch on the loaded article store; the documents are then checked by
// verify, which recomputes them from the source rows alone.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>

#include "daemon/replay.h"
#include "formats/decoder.h"
#include "projections/buckets/bucket_tables.h"
#include "projections/reference_index.h"
#include "projections/stream.h"
#include "projections/maintenance.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::SourcePath;

// The most a one-event batch of the article model may take: BEGIN, the
// locks and the load in one; the entity writes with the phase-2 locks and
// everything the projections read ahead (Projection::ReadAhead); one per
// read that depends on an earlier answer (a lookup's targets, the bucket
// documents a probe found, their members); the document writes, the
// positions and COMMIT in one. Sent one by one, these batches took 17 to
// 20; pipelined, 8 to 11 (2026-11-27); read ahead, 3 to 5 (2026-11-28).
constexpr uint64_t kMaxRoundTripsPerSmallBatch = 6;

struct Change {
  const char* what;
  const char* event;
};

// The article's events, replayed into its store.
void LoadArticle(testing::ArticleOnPostgres& article) {
  ReplayOptions load;
  load.batch_size = 5000;
  ReplayReport loaded;
  ASSERT_TRUE(ReplayLog(article.decoder, article.applier, &article.store,
                        SourcePath("tests/data/article/events.jsonl"), load, &loaded)
                  .ok());
}

// The projection of `config` named `name` (null when none is).
const ProjectionConfig* ProjectionNamed(const Config& config, const std::string& name) {
  for (const ProjectionConfig& projection : config.projections) {
    if (projection.name == name) return &projection;
  }
  return nullptr;
}

TEST(RoundTrips, ASmallBatchTakesAFewRoundTripsWhateverItsStatements) {
  testing::ArticleOnPostgres article;
  ASSERT_NO_FATAL_FAILURE(LoadArticle(article));

  const Change changes[] = {
      // A lookup's target: every book of a1 (books, catalog_books) again.
      {"author renamed",
       R"({"type": "author", "id": "a1", "op": "patch", "version": 100,)"
       R"( "data": {"firstName": "Tom"}})"},
      // A count, an id list and a lookup through authorIds.
      {"book added",
       R"({"type": "book", "id": "b900", "op": "upsert", "version": 1,)"
       R"( "data": {"name": "New", "authorIds": ["a1", "a2"], "pubId": "mspress"}})"},
      // A top-3 embed and a bucket of 100.
      {"comment added",
       R"({"type": "comment", "id": "c900", "op": "upsert", "version": 1,)"
       R"( "data": {"postId": "p1", "author": "x", "comment": "late",)"
       R"( "createdAt": 999999}})"},
      {"book deleted", R"({"type": "book", "id": "b900", "op": "delete", "version": 2})"},
  };
  int n = 0;
  for (const Change& change : changes) {
    const std::string path = ::testing::TempDir() + "round_trips_" + std::to_string(n++) + ".jsonl";
    std::ofstream(path) << change.event << "\n";
    ReplayOptions options;
    options.batch_size = 1;
    ReplayReport report;
    Status status = ReplayLog(article.decoder, article.applier, &article.store, path, options,
                              &report);
    ASSERT_TRUE(status.ok()) << change.what << ": " << status.ToString();
    ASSERT_EQ(1u, report.stats.applied) << change.what;
    ASSERT_EQ(1u, report.batches) << change.what;
    std::cout << change.what << ": " << report.stats.round_trips << " round trips, "
              << report.stats.statements << " statements, "
              << report.stats.documents_written << " documents written\n";
    EXPECT_GT(report.stats.documents_written + report.stats.documents_deleted, 0u)
        << change.what;
    EXPECT_LE(report.stats.round_trips, kMaxRoundTripsPerSmallBatch) << change.what;
    // BEGIN, the writers' lock, the epoch and the entity locks went with
    // the load: at least four statements more than round trips.
    EXPECT_GE(report.stats.statements, report.stats.round_trips + 4) << change.what;
  }

  std::vector<std::string> differences;
  ASSERT_TRUE(Verify(article.plan, &article.store, MaintenanceOptions(), &differences).ok());
  EXPECT_TRUE(differences.empty()) << differences.front();
}

// The positions go with COMMIT, so their fence is the server's: a fenced
// stream that is not where the batch expected fails the statement, and the
// transaction commits nothing of the batch.
TEST(RoundTrips, AFencedPositionThatMovedFailsTheCommitWithConflict) {
  testing::ArticleOnPostgres article;
  const std::string schema = article.config.store.schema;
  auto save = [&](std::optional<int64_t> expected, int64_t position) {
    std::unique_ptr<StoreTransaction> txn;
    Status status = article.store.Begin(&txn);
    if (!status.ok()) return status;
    PositionUpdate update;
    update.at = {"file:fence", 0, position};
    update.expected_previous = expected;
    update.applied = 1;
    status = txn->ledger().SavePositions({update});
    return status.ok() ? txn->Commit() : status;
  };
  auto stored = [&] {
    return testing::Sql("select position::text || ' ' || applied::text from " + schema +
                        ".positions where source = 'file:fence'");
  };
  ASSERT_TRUE(save(-1, 10).ok());  // a new stream, expected to be new
  EXPECT_EQ(std::vector<std::string>({"10 1"}), stored());
  ASSERT_TRUE(save(10, 20).ok());  // where it was expected
  EXPECT_EQ(std::vector<std::string>({"20 2"}), stored());

  Status moved = save(10, 30);  // another consumer took it to 20
  EXPECT_TRUE(moved.IsConflict()) << moved.ToString();
  EXPECT_NE(std::string::npos, moved.message().find("file:fence partition 0")) << moved.message();
  Status taken = save(-1, 30);  // expected new, but it exists
  EXPECT_TRUE(taken.IsConflict()) << taken.ToString();
  EXPECT_EQ(std::vector<std::string>({"20 2"}), stored());  // neither committed

  ASSERT_TRUE(save(std::nullopt, 5).ok());  // unfenced: moves it anyway
  EXPECT_EQ(std::vector<std::string>({"5 3"}), stored());
}

// A deferred statement is prepared and its literals quoted on the
// connection when it is queued. A connection lost by then fails the batch
// as a lost read does (Transient: the batch is retried on a new connection)
// instead of throwing out of the store: that exception ended `denormd run`
// with std::terminate when the PostgreSQL primary was killed
// (tests/production, StandbyPromoted).
TEST(RoundTrips, AConnectionLostBeforeAStatementIsQueuedFailsTheBatchTransiently) {
  testing::ArticleOnPostgres article;
  std::vector<std::string> pid;
  ASSERT_TRUE(article.postgres().Execute("select pg_backend_pid()", &pid).ok());
  ASSERT_EQ(1u, pid.size());
  // The server ends the store's connection; the store learns it on its
  // next statement, which is the batch's first lock (deferred, and not yet
  // prepared on this connection).
  ASSERT_EQ(std::vector<std::string>{"t"}, testing::Sql("select pg_terminate_backend(" + pid[0] + ")"));
  const EventBatch batch = DecodeBatch(
      article.decoder,
      {testing::LogRecord({"file:lost", 0, 1},
                          R"({"type": "author", "id": "a9", "op": "upsert", "version": 1,)"
                          R"( "data": {"firstName": "Ada"}})")});
  BatchStats stats;
  Status status;
  ASSERT_NO_THROW(status = article.applier.Apply(&article.store, batch, &stats));
  EXPECT_TRUE(status.IsTransient()) << status.ToString();
  EXPECT_NE(status.message().find("the connection to PostgreSQL was lost ("), std::string::npos)
      << status.ToString();
  // The retry connects again and applies it.
  ASSERT_NO_THROW(status = article.applier.Apply(&article.store, batch, &stats));
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(std::vector<std::string>{"Ada"},
            testing::Sql("select doc->>'firstName' from " + article.config.store.schema +
                         ".authors where id = 'a9'"));
}


// After the connection is lost, every role still answers with a Status:
// none may throw out of the store, and statements that build their SQL
// first (a table's quoted name) must not ask the lost connection for it.
// pqxx's quote_name did, and ended `denormd run` with std::terminate when
// the PostgreSQL primary was killed in the middle of a batch that wrote
// comment pages (tests/production, StandbyPromoted, CI of 4cb1b6f).
TEST(RoundTrips, EveryRoleAnswersWithAStatusOnceTheConnectionIsLost) {
  testing::ArticleOnPostgres article;
  const ProjectionConfig* pages = ProjectionNamed(article.config, "post_comments");
  const ProjectionConfig* posts = ProjectionNamed(article.config, "posts");
  ASSERT_NE(nullptr, pages);
  ASSERT_NE(nullptr, posts);
  std::vector<std::string> pid;
  ASSERT_TRUE(article.postgres().Execute("select pg_backend_pid()", &pid).ok());
  ASSERT_EQ(1u, pid.size());
  std::unique_ptr<StoreTransaction> txn;
  ASSERT_TRUE(article.store.Begin(&txn).ok());
  ASSERT_EQ(std::vector<std::string>{"t"}, testing::Sql("select pg_terminate_backend(" + pid[0] + ")"));
  // The first statement sent learns of the loss.
  std::vector<StoredPosition> positions;
  Status first;
  ASSERT_NO_THROW(first = txn->ledger().LoadPositions("file:lost", &positions));
  EXPECT_TRUE(first.IsTransient()) << first.ToString();
  // Every later one, on the connection libpq now knows is gone.
  std::vector<BucketSlot> slots;
  std::map<std::string, uint64_t> numbers;
  uint64_t written = 0;
  std::vector<DocumentRow> rows;
  // A deferred statement (a lock) is only queued, and fails the commit.
  std::vector<std::pair<std::string, std::function<Status()>>> calls = {
      {"ProbeBuckets", [&] { return txn->buckets().ProbeBuckets(*pages, {{"p1", {"00", "c1"}}}, &slots); }},
      {"MaxBucketNumbers", [&] { return txn->buckets().MaxBucketNumbers(*pages, {"p1"}, &numbers); }},
      {"RespaceBuckets", [&] { return txn->buckets().RespaceBuckets(*pages, "p1", 1, 5, 2, &written); }},
      {"Load", [&] { return txn->documents().Load(*posts, {"p1"}, &rows); }},
      {"Commit", [&] { return txn->Commit(); }},
  };
  Status locked;
  ASSERT_NO_THROW(locked = txn->locks().LockKeys({"posts/p1"}, WriteLocks::Mode::kWait));
  for (const auto& call : calls) {
    Status status;
    ASSERT_NO_THROW(status = call.second()) << call.first;
    EXPECT_TRUE(status.IsTransient()) << call.first << ": " << status.ToString();
  }
}


// What a role read ahead answers a later read with no round trip of its own,
// and stops answering once what it read was written in the transaction: a
// counter after an entity write that moved it, a document after its upsert.
TEST(RoundTrips, AReadAheadAnswersUntilWhatItReadIsWritten) {
  testing::ArticleOnPostgres article;
  ASSERT_NO_FATAL_FAILURE(LoadArticle(article));
  const ProjectionConfig* authors = ProjectionNamed(article.config, "authors");
  ASSERT_NE(nullptr, authors);
  // A new book of a1: its index row in book.authorIds moves a1's counter.
  EntityRecord book;
  book.key = {"book", "b901"};
  book.version = 1;
  ASSERT_TRUE(ParseJsonShared(R"({"name": "Ahead", "authorIds": ["a1"]})", &book.data).ok());
  EntityWrite write{book, article.plan.ReferenceRowsOf(book), {}};
  const Relation* by_author = nullptr;
  for (const ReferenceRow& row : write.added) {
    if (row.target == "a1") by_author = row.relation;
  }
  ASSERT_NE(nullptr, by_author);

  std::unique_ptr<StoreTransaction> txn;
  ASSERT_TRUE(article.store.Begin(&txn).ok());
  txn->index().ReadCountsAhead(*by_author, {"a1"});
  txn->documents().ReadAhead(*authors, {"a1"});
  std::map<std::string, uint64_t> before;
  ASSERT_TRUE(CountReferrers(txn->index(), *by_author, {"a1"}, &before).ok());
  const uint64_t trips = txn->round_trips();
  std::vector<DocumentRow> stored;
  ASSERT_TRUE(txn->documents().Load(*authors, {"a1"}, &stored).ok());
  ASSERT_EQ(1u, stored.size());
  EXPECT_EQ(trips, txn->round_trips()) << "the document read ahead was read again";
  std::map<std::string, uint64_t> again;
  ASSERT_TRUE(CountReferrers(txn->index(), *by_author, {"a1"}, &again).ok());
  EXPECT_EQ(before, again);
  EXPECT_EQ(trips, txn->round_trips()) << "the counter read ahead was read again";

  ASSERT_TRUE(txn->source().WriteEntities({write}).ok());
  std::map<std::string, uint64_t> after;
  ASSERT_TRUE(CountReferrers(txn->index(), *by_author, {"a1"}, &after).ok());
  EXPECT_EQ(before["a1"] + 1, after["a1"]);
  uint64_t written = 0;
  ASSERT_TRUE(
      txn->documents().Upsert(*authors, {{"a1", std::nullopt, R"({"id":"a1","ahead":1})", {}}},
                              &written)
          .ok());
  stored.clear();
  ASSERT_TRUE(txn->documents().Load(*authors, {"a1"}, &stored).ok());
  ASSERT_EQ(1u, stored.size());
  EXPECT_NE(std::string::npos, stored[0].json.find("ahead")) << stored[0].json;
}

// `count` new books b<first>.. of author a1, each named with `name_bytes`
// bytes, as one log, and what replaying it in one batch took.
ReplayReport AddBooks(testing::ArticleOnPostgres& article, int first, int count,
                      size_t name_bytes, const std::string& also = "") {
  std::string text;
  for (int i = first; i < first + count; ++i) {
    const std::string id = "b" + std::to_string(i);
    text += R"({"type": "book", "id": ")" + id + R"(", "op": "upsert", "version": 1,)" +
            R"( "data": {"name": ")" + id + std::string(name_bytes, 'n') +
            R"(", "authorIds": ["a1"]}})" + "\n";
  }
  text += also;
  ReplayOptions options;
  options.batch_size = 1000;
  ReplayReport report;
  Status status = ReplayLog(article.decoder, article.applier, &article.store,
                            testing::WriteTempFile("books_" + std::to_string(first) + ".jsonl", text),
                            options, &report);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return report;
}

// A batch rewriting megabytes of documents sends them in statements of
// about PostgresDocumentTables::kUpsertJsonBytes, and sends what it queued
// each time the text reaches PostgresWork::kSendQueuedAtBytes: what the
// client holds for one round trip stays that size, not the batch's (a
// batch of 5,000 comments at the benchmark's full size held 21 MB of
// bucket documents three times over). The same 24 books named in 24 bytes
// and then in 256 KiB each (6 MiB of books and 6 of catalog documents) show
// the statements and round trips that adds; the documents are then checked
// by verify.
TEST(RoundTrips, ABatchOfMegabytesOfDocumentsGoesInBoundedStatementsAndSends) {
  testing::ArticleOnPostgres article;
  ASSERT_NO_FATAL_FAILURE(LoadArticle(article));
  const ReplayReport small = AddBooks(article, 1000, 24, 24);
  const ReplayReport large = AddBooks(article, 2000, 24, 256 << 10);
  ASSERT_EQ(1u, small.batches);
  ASSERT_EQ(1u, large.batches);
  std::cout << "small: " << small.stats.round_trips << " round trips, " << small.stats.statements
            << " statements; large: " << large.stats.round_trips << " round trips, "
            << large.stats.statements << " statements\n";
  // 12 MiB of documents: 5 statements or more in each collection instead
  // of one, and 2 sends or more before the batch's reads asked for one.
  EXPECT_GE(large.stats.statements, small.stats.statements + 8);
  EXPECT_GE(large.stats.round_trips, small.stats.round_trips + 2);
  EXPECT_LE(large.stats.round_trips, small.stats.round_trips + 6);
  const std::string& schema = article.config.store.schema;
  EXPECT_EQ(std::vector<std::string>({"24\t" + std::to_string(24 * ((256 << 10) + 5))}),
            testing::Sql("select count(*), sum(length(doc->>'name')) from " + schema +
                         ".books where id like 'b2%' and length(id) = 5"));
  std::vector<std::string> differences;
  ASSERT_TRUE(Verify(article.plan, &article.store, MaintenanceOptions(), &differences).ok());
  EXPECT_TRUE(differences.empty()) << differences.front();
}

// A statement refused by its check (a catalog key another projection's
// document holds) in a batch that sent part of its text early still
// refuses the whole transaction: the batch is split until the review
// responsible is alone, it becomes a dead letter, and every book commits.
TEST(RoundTrips, ARefusalInATextSentEarlyRefusesTheWholeBatch) {
  testing::ArticleOnPostgres article;
  ASSERT_NO_FATAL_FAILURE(LoadArticle(article));
  const ReplayReport report =
      AddBooks(article, 3000, 24, 256 << 10,
               R"({"type": "review", "id": "b3012", "op": "upsert", "version": 1,)"
               R"( "data": {"bookId": "b3012", "stars": 1}})"
               "\n");
  EXPECT_EQ(1u, report.stats.dead_letters);
  EXPECT_EQ(24u, report.stats.applied);
  const std::string& schema = article.config.store.schema;
  EXPECT_EQ(std::vector<std::string>({"24"}),
            testing::Sql("select count(*) from " + schema + ".catalog where doc->>'type' = 'book'"
                         " and id like 'b3%' and length(id) = 5"));
  const std::vector<std::string> letters =
      testing::Sql("select reason from " + schema + ".dead_letters where source like '%books_3000%'");
  ASSERT_EQ(1u, letters.size());
  EXPECT_NE(std::string::npos, letters[0].find("has the key of document b3012")) << letters[0];
  std::vector<std::string> differences;
  ASSERT_TRUE(Verify(article.plan, &article.store, MaintenanceOptions(), &differences).ok());
  EXPECT_TRUE(differences.empty()) << differences.front();
}

}  // namespace
}  // namespace denormd
