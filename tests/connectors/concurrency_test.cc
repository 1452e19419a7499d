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

#include "connectors/postgres_store.h"
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

}  // namespace
}  // namespace denormd
