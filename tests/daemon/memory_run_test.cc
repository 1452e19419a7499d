// RunInMemory, what `denormd test` runs: logs applied in order, dead letters
// with their lines, and — over random configs and streams
// (tests/random_scenario.h) — the same result at every batch size (stable
// buckets: the same content within the invariants), with no bucket group
// ever rendered whole for not fitting.
#include <algorithm>

#include <gtest/gtest.h>

#include "daemon/memory_run.h"
#include "formats/format_registry.h"
#include "tests/random_scenario.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

Config Parse(const std::string& yaml) { return testing::ParseTestConfig(yaml); }

constexpr const char* kLibrary = R"(
store: {schema: library}
entities: [author, book]
projections:
  authors:
    from: author
    fields: {countOfBooks: {count: book, via: authorIds}}
)";

TEST(RunInMemory, AppliesTheLogsInOrderAndKeepsTheDeadLetters) {
  const Config config = Parse(kLibrary);
  const std::string first = testing::WriteTempFile(
      "first.jsonl",
      R"({"type": "author", "id": "a1", "op": "upsert", "version": 1, "data": {"name": "Ann"}})"
      "\n"
      R"({"type": "book", "id": "b1", "op": "upsert", "data": {"authorIds": ["a1"]}})"
      "\n");
  const std::string second = testing::WriteTempFile(
      "second.jsonl",
      "\n"  // a blank line is no record, but counts as a line
      R"({"type": "author", "id": "a1", "op": "patch", "version": 1, "data": {"name": "Old"}})"
      "\n"
      R"({"type": "dragon", "id": "d1", "op": "upsert", "data": {}})"
      "\n"
      R"({"type": "author", "id": "a1", "op": "patch", "version": 2, "data": {"name": "Anne"}})"
      "\n");
  MemoryRun run;
  ASSERT_TRUE(RunInMemory(config, {first, second}, 1, &run).ok());
  EXPECT_EQ(R"({"name":"Anne","id":"a1","countOfBooks":1})",
            run.documents.collections["authors"]["a1"]);
  EXPECT_EQ(std::optional<uint64_t>(1), run.documents.stale);
  EXPECT_EQ(std::optional<uint64_t>(1), run.documents.dead);
  ASSERT_EQ(1u, run.dead_letters.size());
  EXPECT_EQ(3, run.dead_letters[0].at.position);
  EXPECT_EQ(run.logs[1].source, run.dead_letters[0].at.source);
  EXPECT_NE(std::string::npos, run.dead_letters[0].reason.find("unknown entity type \"dragon\""));
  ASSERT_EQ(2u, run.logs.size());
  EXPECT_EQ(5u, run.stats.events);

  // A log that cannot be opened: InvalidInput, with what came before it.
  Status status = RunInMemory(config, {first, "/nonexistent.jsonl"}, 1, &run);
  EXPECT_TRUE(status.IsInvalidInput()) << status.ToString();
  EXPECT_EQ(R"({"name":"Ann","id":"a1","countOfBooks":1})",
            run.documents.collections["authors"]["a1"]);
}

class RandomConfigInMemory : public ::testing::TestWithParam<uint32_t> {};

TEST_P(RandomConfigInMemory, EveryBatchSizeGivesTheSameResult) {
  const testing::RandomScenario scenario = testing::MakeRandomScenario(GetParam());
  SCOPED_TRACE("config:\n" + scenario.config);
  const Config config = Parse(scenario.config);
  ASSERT_FALSE(config.projections.empty());
  const std::string log = testing::WriteTempFile("events.jsonl", testing::EventLog(scenario));
  MemoryRun one;
  ASSERT_TRUE(RunInMemory(config, {log}, 1, &one).ok());
  uint64_t documents = 0;
  for (const auto& collection : one.documents.collections) documents += collection.second.size();
  EXPECT_GT(documents, 0u);
  EXPECT_GT(*one.documents.dead, 0u);
  EXPECT_EQ(0u, one.stats.tails_rendered);  // the stored buckets always fit
  for (size_t batch : {2, 7, 5000}) {
    MemoryRun other;
    ASSERT_TRUE(RunInMemory(config, {log}, batch, &other).ok());
    std::string differences;
    for (const std::string& line : DiffDocumentSets(other.documents, one.documents)) {
      differences += line + "\n";
    }
    EXPECT_EQ("", differences) << "batch size " << batch << " != batch size 1";
    EXPECT_EQ(0u, other.stats.tails_rendered);
  }
}

// And whatever the batch size, the documents are what the definitions compute
// from the source rows (verify's recomputation, which shares no relation,
// index or counter with the batches), after every batch.
TEST_P(RandomConfigInMemory, EveryBatchEqualsTheDefinitions) {
  const testing::RandomScenario scenario = testing::MakeRandomScenario(GetParam());
  SCOPED_TRACE("config:\n" + scenario.config + "batch size " +
               std::to_string(scenario.batch_size));
  testing::InMemory m(scenario.config);
  for (size_t start = 0; start < scenario.events.size(); start += scenario.batch_size) {
    const size_t end = std::min(scenario.events.size(), start + scenario.batch_size);
    m.Apply(std::vector<std::string>(scenario.events.begin() + start,
                                     scenario.events.begin() + end));
    const std::vector<std::string> differences = m.Differences();
    ASSERT_TRUE(differences.empty()) << "after event " << end << ": " << differences.front();
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomConfigInMemory, ::testing::Range<uint32_t>(1, 101));

}  // namespace
}  // namespace denormd
