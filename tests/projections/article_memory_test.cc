// The article scenario replayed in process, against MemoryStore: every pattern
// of the language, with the exact expected documents, at several batch sizes.
#include <gtest/gtest.h>

#include "daemon/replay.h"
#include "projections/memory_store.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::Collections;
using testing::SourcePath;

Config LoadArticleConfig() {
  std::vector<ConfigError> errors;
  auto config = LoadConfig(SourcePath("tests/data/article/config.yaml"), &errors);
  EXPECT_TRUE(config.has_value());
  for (const auto& e : errors) ADD_FAILURE() << e.ToString("config.yaml");
  return config ? *config : Config();
}

Collections CollectionsOf(const MemoryState& state) {
  Collections out;
  for (const auto& collection : state.collections) {
    for (const auto& doc : collection.second) out[collection.first][doc.second.id] = doc.second.json;
  }
  return out;
}

using Scenario = testing::ArticleScenario;

class ArticleMemoryTest : public ::testing::TestWithParam<Scenario> {};

TEST_P(ArticleMemoryTest, ReplayProducesExactlyTheExpectedDocuments) {
  const Scenario& scenario = GetParam();
  Config config = LoadArticleConfig();
  ProjectionPlan plan(config);
  BatchApplier applier(plan);
  NativeDecoder decoder(config);
  MemoryStore store;
  ReplayOptions options;
  options.batch_size = scenario.batch_size;
  ReplayReport report;
  std::string events = SourcePath(std::string("tests/data/article/") + scenario.events);
  std::string expected = SourcePath(std::string("tests/data/article/") + scenario.expected);
  Status status = ReplayLog(decoder, applier, &store, events, options, &report);
  ASSERT_TRUE(status.ok()) << status.ToString();

  EXPECT_EQ("", testing::DiffCollections(CollectionsOf(store.state()), expected));
  uint64_t stale = 0, dead = 0;
  testing::ExpectedCounts(expected, &stale, &dead);
  EXPECT_EQ(stale, report.stats.stale);
  EXPECT_EQ(dead, report.stats.dead_letters);
  EXPECT_EQ(dead, store.state().dead_letters.size());
  for (const DeadLetter& letter : store.state().dead_letters) {
    EXPECT_FALSE(letter.reason.empty());
    EXPECT_EQ(report.source, letter.at.source);
    EXPECT_GT(letter.at.position, 0);
  }

  // A second replay resumes after the last line and applies nothing.
  ReplayReport again;
  ASSERT_TRUE(ReplayLog(decoder, applier, &store, events, options, &again).ok());
  EXPECT_EQ(report.last_line, again.resumed_after_line);
  EXPECT_EQ(0u, again.stats.events);
}

INSTANTIATE_TEST_SUITE_P(
    BatchSizes, ArticleMemoryTest,
    ::testing::ValuesIn(testing::AllArticleScenarios()),
    [](const ::testing::TestParamInfo<Scenario>& info) {
      return testing::ArticleScenarioName(info.param);
    });

}  // namespace
}  // namespace denormd
