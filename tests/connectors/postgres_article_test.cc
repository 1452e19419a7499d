// The article scenario on the real PostgreSQL: exact documents in every
// collection table, dead letters with reasons, stale counts, at batch sizes
// 1, 7 and 5000; verify clean; resumable replays.
#include <gtest/gtest.h>

#include "connectors/postgres_store.h"
#include "projections/maintenance.h"
#include "daemon/replay.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::SourcePath;
using testing::Sql;

using Scenario = testing::ArticleScenario;

class PostgresArticleTest : public ::testing::TestWithParam<Scenario> {};

TEST_P(PostgresArticleTest, ReplayProducesExactlyTheExpectedTables) {
  const Scenario& scenario = GetParam();
  testing::ArticleOnPostgres article;
  const Config& config = article.config;
  const ProjectionPlan& plan = article.plan;
  const BatchApplier& applier = article.applier;
  Store& store = article.store;
  std::string events = SourcePath(std::string("tests/data/article/") + scenario.events);
  std::string expected = SourcePath(std::string("tests/data/article/") + scenario.expected);
  ReplayOptions options;
  options.batch_size = scenario.batch_size;
  ReplayReport report;
  Status status = ReplayLog(article.decoder, applier, &store, events, options, &report);
  ASSERT_TRUE(status.ok()) << status.ToString();

  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(config), expected));
  // Each transaction at least begins, joins the writers and commits; each
  // round trip sends one statement or more.
  EXPECT_GE(report.stats.round_trips, 3 * report.batches);
  EXPECT_GE(report.stats.statements, report.stats.round_trips);

  uint64_t stale = 0, dead = 0;
  testing::ExpectedCounts(expected, &stale, &dead);
  const std::string& schema = config.store.schema;
  EXPECT_EQ(std::vector<std::string>({std::to_string(stale) + "\t" + std::to_string(dead)}),
            Sql("select sum(stale), sum(dead) from " + schema + ".positions"));
  // Every dead letter keeps its raw bytes, its line and a reason.
  std::vector<std::string> letters = Sql(
      "select position, reason, convert_from(raw, 'UTF8') from " + schema +
      ".dead_letters order by position");
  ASSERT_EQ(dead, letters.size());
  for (const std::string& letter : letters) {
    EXPECT_NE(std::string::npos, letter.find('\t')) << letter;
    EXPECT_GT(letter.size(), 10u) << letter;
  }
  // The stored position is the last line of the log.
  EXPECT_EQ(std::vector<std::string>({std::to_string(report.last_line)}),
            Sql("select position from " + schema + ".positions"));

  // verify recomputes everything from the source and finds nothing.
  std::vector<std::string> differences;
  ASSERT_TRUE(Verify(plan, &store, MaintenanceOptions(), &differences).ok());
  EXPECT_TRUE(differences.empty()) << differences.front();
}

INSTANTIATE_TEST_SUITE_P(
    BatchSizes, PostgresArticleTest,
    ::testing::ValuesIn(testing::AllArticleScenarios()),
    [](const ::testing::TestParamInfo<Scenario>& info) {
      return testing::ArticleScenarioName(info.param);
    });

TEST(PostgresDeadLetters, KeepReasonsThatSayWhatIsWrong) {
  testing::ArticleOnPostgres article;
  const Config& config = article.config;
  ReplayReport report;
  ASSERT_TRUE(ReplayLog(article.decoder, article.applier, &article.store, SourcePath("tests/data/article/events.jsonl"),
                        ReplayOptions(), &report)
                  .ok());
  std::vector<std::string> reasons =
      Sql("select reason from " + config.store.schema + ".dead_letters order by position");
  std::vector<std::string> expected = {
      "not valid JSON",                       // truncated line
      "unknown entity type \"dragon\"",
      "field \"id\" must not be empty",
      "op \"upsert\" needs a \"data\" object",
      "unknown op \"explode\"",
      "field \"version\" must be an unsigned 64-bit integer",
      "an event must be a JSON object",       // [1, 2, 3]
  };
  ASSERT_EQ(expected.size(), reasons.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NE(std::string::npos, reasons[i].find(expected[i])) << reasons[i];
  }
}

}  // namespace
}  // namespace denormd
