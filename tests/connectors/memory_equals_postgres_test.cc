// `denormd test` runs on the in-memory store; users trust it to say what
// PostgreSQL will hold. So the same logs are applied both ways — the article
// scenarios, and random configs with random streams (tests/random_scenario.h)
// — and every collection, every bucket's place, the dead letters (line and
// reason) and the stale count must be equal.
#include <gtest/gtest.h>

#include "daemon/memory_run.h"
#include "daemon/replay.h"
#include "projections/maintenance.h"
#include "tests/random_scenario.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::SourcePath;
using testing::Sql;

// What a replay left in the test database, as a DocumentSet.
DocumentSet PostgresResult(const Config& config) {
  DocumentSet set = EmptyDocumentSet(config);
  for (auto& collection : testing::ReadCollections(config)) {
    set.collections[collection.first] = std::move(collection.second);
  }
  std::vector<std::string> counts =
      Sql("select coalesce(sum(dead), 0), coalesce(sum(stale), 0) from " + config.store.schema +
          ".positions");
  EXPECT_EQ(1u, counts.size());
  if (counts.size() == 1) {
    set.dead = std::stoull(counts[0].substr(0, counts[0].find('\t')));
    set.stale = std::stoull(counts[0].substr(counts[0].find('\t') + 1));
  }
  return set;
}

// "line<TAB>reason", in line order.
std::vector<std::string> PostgresDeadLetters(const Config& config) {
  return Sql("select position, reason from " + config.store.schema +
             ".dead_letters order by position");
}

std::vector<std::string> MemoryDeadLetters(const MemoryRun& run) {
  std::vector<std::string> out;
  for (const DeadLetter& letter : run.dead_letters) {
    out.push_back(std::to_string(letter.at.position) + "\t" + letter.reason);
  }
  return out;
}

// Applies `log` at `batch_size` to `config` in memory and on the test
// database (its schema), and expects the same result, bucket positions
// included. Returns the documents the memory run made.
uint64_t ExpectSameBothWays(const Config& config, const std::string& log, size_t batch_size) {
  MemoryRun memory;
  Status status = RunInMemory(config, {log}, batch_size, &memory);
  EXPECT_TRUE(status.ok()) << status.ToString();

  Engine engine(config, config.store.postgres);
  status = engine.store.Open();
  EXPECT_TRUE(status.ok()) << status.ToString();
  ReplayOptions options;
  options.batch_size = batch_size;
  ReplayReport report;
  status = ReplayLog(engine.decoder, engine.applier, &engine.store, log, options, &report);
  EXPECT_TRUE(status.ok()) << status.ToString();

  DiffOptions exact;
  exact.bucket_positions = true;
  std::string differences;
  for (const std::string& line : DiffDocumentSets(memory.documents, PostgresResult(config), exact)) {
    differences += line + "\n";
  }
  EXPECT_EQ("", differences) << "(memory != PostgreSQL)";
  EXPECT_EQ(MemoryDeadLetters(memory), PostgresDeadLetters(config));
  EXPECT_EQ(memory.stats.applied, report.stats.applied);

  // And both are what the definitions compute.
  std::vector<std::string> verify;
  EXPECT_TRUE(Verify(engine.plan, &engine.store, MaintenanceOptions(), &verify).ok());
  EXPECT_TRUE(verify.empty()) << verify.front();
  uint64_t documents = 0;
  for (const auto& collection : memory.documents.collections) documents += collection.second.size();
  return documents;
}

// The article scenarios, but the random log at batch size 1 (3,343
// transactions; postgres_article_test runs it): batch size 7 covers small
// batches on that log.
std::vector<testing::ArticleScenario> ArticleScenarios() {
  std::vector<testing::ArticleScenario> out;
  for (const testing::ArticleScenario& scenario : testing::AllArticleScenarios()) {
    if (scenario.batch_size == 1 && std::string(scenario.events).find("random") != std::string::npos) {
      continue;
    }
    out.push_back(scenario);
  }
  return out;
}

class ArticleBothWays : public ::testing::TestWithParam<testing::ArticleScenario> {};

TEST_P(ArticleBothWays, MemoryAndPostgresGiveTheSameResult) {
  const testing::ArticleScenario& scenario = GetParam();
  Config config = testing::LoadTestConfig("tests/data/article/config.yaml", testing::TestSchemaName());
  const uint64_t documents = ExpectSameBothWays(
      config, SourcePath(std::string("tests/data/article/") + scenario.events), scenario.batch_size);
  EXPECT_GT(documents, 10u);
}

INSTANTIATE_TEST_SUITE_P(
    BatchSizes, ArticleBothWays, ::testing::ValuesIn(ArticleScenarios()),
    [](const ::testing::TestParamInfo<testing::ArticleScenario>& info) {
      return testing::ArticleScenarioName(info.param);
    });

// Every statement's text arguments reach PostgreSQL as SQL literals
// (PostgresWork::AppendLiteral): ids and values that SQL would read as
// syntax — quotes, doubled quotes, backslashes, dollar quoting, comments,
// semicolons, E'' prefixes, control characters, non-ASCII — are stored and
// shown exactly as the in-memory store, which has no SQL, keeps them.
TEST(SqlTextBothWays, TextsSqlWouldReadAsSyntaxArriveExactly) {
  // JSON string contents: \\ is one backslash, \" a double quote.
  const std::vector<std::string> texts = {
      R"(O'Brien)",          R"('')",           R"(\\')",        R"(\\\\' or 1=1 --)",
      R"(a'; drop table x; --)", R"($$ $q$ '$$)", R"(E'\\x41')",    R"(tab\there\nnewline)",
      R"(caf\u00e9 \ud83d\ude00 '\u00e9')", R"(back\\slash\\)", R"(/* c */ ' */)",
      R"(\"quoted\" '\"')"};
  std::string log;
  int version = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& text = texts[i];
    const std::string author = "a'" + std::to_string(i) + "'";
    log += R"({"type":"author","id":")" + author + R"(","version":)" + std::to_string(++version) +
           R"(,"op":"upsert","data":{"firstName":")" + text + R"(","lastName":")" + text +
           R"(","images":[{"thumbnail":")" + text + R"("}]}})" "\n";
    log += R"({"type":"book","id":"b'\\)" + std::to_string(i) + R"(","version":)" +
           std::to_string(++version) + R"(,"op":"upsert","data":{"name":")" + text +
           R"(","authorIds":[")" + author + R"("],"pubId":"p"}})" "\n";
    log += R"({"type":"comment","id":"c)" + std::to_string(1000 + i) + R"(","version":)" +
           std::to_string(++version) + R"(,"op":"upsert","data":{"postId":"p'1","createdAt":)" +
           std::to_string(i) + R"(,"author":")" + text + R"(","comment":")" + text + R"("}})" "\n";
  }
  // And renamed, so that the documents naming them are rewritten.
  log += R"({"type":"author","id":"a'0'","version":)" + std::to_string(++version) +
         R"(,"op":"upsert","data":{"firstName":"it's","lastName":"\\'';"}})" "\n";
  for (size_t batch_size : {1u, 100u}) {
    SCOPED_TRACE("batch size " + std::to_string(batch_size));
    // A fresh schema each time (LoadTestConfig drops it).
    Config config =
        testing::LoadTestConfig("tests/data/article/config.yaml", testing::TestSchemaName());
    const uint64_t documents =
        ExpectSameBothWays(config, testing::WriteTempFile("sql-texts.jsonl", log), batch_size);
    EXPECT_GE(documents, 2 * texts.size());
  }
}

class RandomConfigBothWays : public ::testing::TestWithParam<uint32_t> {};

TEST_P(RandomConfigBothWays, MemoryAndPostgresGiveTheSameResult) {
  const testing::RandomScenario scenario = testing::MakeRandomScenario(GetParam());
  SCOPED_TRACE("config:\n" + scenario.config + "batch size " +
               std::to_string(scenario.batch_size));
  Config config = testing::ConfigOnTestDatabase(scenario.config);
  ASSERT_FALSE(config.projections.empty());
  const std::string log = testing::WriteTempFile("events.jsonl", testing::EventLog(scenario));
  const uint64_t documents = ExpectSameBothWays(config, log, scenario.batch_size);
  EXPECT_GT(documents, 0u);
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomConfigBothWays, ::testing::Range<uint32_t>(1, 25));

}  // namespace
}  // namespace denormd
