// Lanes (projections/lanes.h): which entity types apply apart, and where a
// lane resumes on a stream (projections/stream.h, StreamProgress).
//
// The layout is checked against what batches do, not against the plan that
// made it: every event of a scenario is applied alone on a memory store that
// records the lock keys each batch takes and the documents it writes, and no
// key or document may be touched by batches of two lanes. Random configs
// (tests/random_scenario.h) cover every derivation, links and shared
// collections; the article config, its parts by name.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include "formats/format_registry.h"
#include "formats/native_format.h"
#include "projections/batch_applier.h"
#include "projections/lanes.h"
#include "projections/memory_store.h"
#include "projections/projection_plan.h"
#include "tests/random_scenario.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

Config Parse(const std::string& yaml) { return testing::ParseTestConfig(yaml); }

// A MemoryStore whose transactions record the lock keys they take.
class RecordingStore : public Store {
 public:
  explicit RecordingStore(MemoryStore& memory) : memory_(memory) {}
  Status Begin(std::unique_ptr<StoreTransaction>* out) override {
    std::unique_ptr<StoreTransaction> inner;
    DENORMD_RETURN_IF_ERROR(memory_.Begin(&inner));
    *out = std::make_unique<Transaction>(std::move(inner), &keys);
    return Status::Ok();
  }
  std::set<std::string> keys;  // since the test last cleared it

 private:
  class Locks : public WriteLocks {
   public:
    Locks(WriteLocks& inner, std::set<std::string>* keys) : inner_(inner), keys_(keys) {}
    Status LockWriters(bool exclusive) override { return inner_.LockWriters(exclusive); }
    Status LockWritersOf(const std::vector<std::string>& parts, bool alone) override {
      return inner_.LockWritersOf(parts, alone);
    }
    Status LockKeys(const std::vector<std::string>& keys, Mode mode) override {
      keys_->insert(keys.begin(), keys.end());
      return inner_.LockKeys(keys, mode);
    }

   private:
    WriteLocks& inner_;
    std::set<std::string>* keys_;
  };
  class Transaction : public testing::ForwardingTransaction {
   public:
    Transaction(std::unique_ptr<StoreTransaction> inner, std::set<std::string>* keys)
        : ForwardingTransaction(std::move(inner)),
          locks_(ForwardingTransaction::locks(), keys) {}
    WriteLocks& locks() override { return locks_; }

   private:
    Locks locks_;
  };
  MemoryStore& memory_;
};

// "" when no lock key and no document is touched by the batches of two
// lanes, each event of `events` applied alone; else the first clash.
std::string FirstClash(const Config& config, const std::vector<std::string>& events,
                       size_t* batches_checked) {
  const ProjectionPlan plan(config);
  const Lanes lanes = Lanes::Of(plan, 64);
  const BatchApplier applier(plan);
  const NativeDecoder decoder(config);
  MemoryStore memory;
  memory.PublishCollections(config.CollectionNames());
  RecordingStore store(memory);
  std::map<std::string, size_t> lane_of_key;  // lock key or "doc <collection> <pk> <id>"
  int64_t line = 0;
  for (const std::string& event : events) {
    const std::vector<RawRecord> records = {testing::LogRecord({"log", 0, ++line}, event)};
    EventBatch batch = DecodeBatch(decoder, records);
    const size_t lane = lanes.LaneOf(batch.events.empty() ? "" : batch.events[0].event.key.type);
    store.keys.clear();
    const size_t outbox_before = memory.state().outbox.size();
    BatchStats stats;
    Status status = applier.Apply(&store, batch, &stats);
    if (!status.ok()) continue;  // refused as data: nothing of it committed
    std::set<std::string> touched = store.keys;
    const auto& outbox = memory.state().outbox;
    for (size_t i = outbox_before; i < outbox.size(); ++i) {
      touched.insert("doc " + outbox[i].collection + " " + outbox[i].pk.value_or("") + " " +
                     outbox[i].id);
    }
    for (const std::string& key : touched) {
      auto seen = lane_of_key.emplace(key, lane);
      if (seen.first->second != lane) {
        return "line " + std::to_string(line) + " (" + event + ") of lane " +
               lanes.Describe(lane) + " touches " + key + ", which lane " +
               lanes.Describe(seen.first->second) + " touched before";
      }
    }
    ++*batches_checked;
  }
  return "";
}

Config Article() {
  std::vector<ConfigError> errors;
  std::optional<Config> config =
      LoadConfig(testing::SourcePath("tests/data/article/config.yaml"), &errors);
  for (const ConfigError& error : errors) ADD_FAILURE() << error.ToString("config.yaml");
  return config ? *config : Config();
}

class LanesOfRandomConfigs : public ::testing::TestWithParam<uint32_t> {};

TEST_P(LanesOfRandomConfigs, NoTwoLanesTouchOneLockKeyOrOneDocument) {
  const testing::RandomScenario scenario = testing::MakeRandomScenario(GetParam());
  const Config config = Parse(scenario.config);
  size_t checked = 0;
  EXPECT_EQ("", FirstClash(config, scenario.events, &checked)) << scenario.config;
  EXPECT_GT(checked, 0u);
}

INSTANTIATE_TEST_SUITE_P(Seeds, LanesOfRandomConfigs, ::testing::Range(1u, 41u));

TEST(LanesOfTheArticle, ItsFourPartsEachInALaneAndNoTwoLanesShareALockOrADocument) {
  const Config config = Article();
  const ProjectionPlan plan(config);
  const Lanes lanes = Lanes::Of(plan, 4);
  std::set<std::vector<std::string>> found;
  for (size_t i = 0; i < lanes.size(); ++i) found.insert(lanes.types(i));
  // The article's parts: people with their addresses and contacts (and,
  // in lane 0, records of no type); stocks alone; the publishing side, where
  // books count for publishers and authors and share the catalog with
  // reviews; posts with their comments.
  EXPECT_EQ((std::set<std::vector<std::string>>{
                {"", "address", "contactDetail", "person"},
                {"stock"},
                {"author", "book", "publisher", "review"},
                {"comment", "post"}}),
            found);
  EXPECT_EQ(0u, lanes.LaneOf(""));
  EXPECT_EQ(0u, lanes.LaneOf("a type the config does not declare"));
  for (size_t i = 0; i < lanes.size(); ++i) EXPECT_EQ(lanes.types(i), lanes.key(i));

  std::vector<std::string> events;
  for (const char* path : {"tests/data/article/events.jsonl",
                                  "tests/data/article/events-random.jsonl"}) {
    std::istringstream lines(testing::ReadFile(testing::SourcePath(path)));
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) events.push_back(line);
    }
  }
  size_t checked = 0;
  EXPECT_EQ("", FirstClash(config, events, &checked));
  EXPECT_GT(checked, 3000u);
}

TEST(LanesOfTheArticle, FewerLanesThanPartsHoldEveryTypeOnce) {
  const Config config = Article();
  const ProjectionPlan plan(config);
  for (size_t max : {1u, 2u, 3u}) {
    const Lanes lanes = Lanes::Of(plan, max);
    ASSERT_EQ(max, lanes.size());
    std::multiset<std::string> types;
    for (size_t i = 0; i < lanes.size(); ++i) {
      types.insert(lanes.types(i).begin(), lanes.types(i).end());
      for (const std::string& type : lanes.types(i)) EXPECT_EQ(i, lanes.LaneOf(type)) << type;
    }
    std::multiset<std::string> declared(config.entities.begin(), config.entities.end());
    declared.insert("");
    EXPECT_EQ(declared, types) << max;
    // One lane keeps the every-type rows of a release before lanes.
    EXPECT_EQ(max == 1, lanes.key(0).empty()) << max;
  }
}

// ---------------------------------------------------------------------------
// Where lanes resume.

StoredPosition Row(LaneKey lane, int64_t position) {
  StoredPosition row;
  row.at = {"kafka:g:t", 0, position};
  row.lane = std::move(lane);
  return row;
}

Lanes TwoLanes() {
  // person/address in one part, stock in the other.
  const Config config = Parse(
      "store: {postgres: \"\", schema: s}\nentities: [person, address, stock]\n"
      "projections:\n"
      "  people: {from: person, fields: {addresses: {embed: address, via: personId}}}\n"
      "  stocks: {from: stock}\n");
  const ProjectionPlan plan(config);
  return Lanes::Of(plan, 4);
}

TEST(StreamProgress, EachTypeIsAppliedThroughTheHighestRowNamingIt) {
  const StreamProgress progress({Row({"", "address", "person"}, 40), Row({"stock"}, 70),
                                 Row({}, 10)});
  EXPECT_EQ(40, progress.AppliedThrough("person"));
  EXPECT_EQ(40, progress.AppliedThrough(""));
  EXPECT_EQ(70, progress.AppliedThrough("stock"));
  // A type no row names had no lane when those rows were written: its
  // records were read as records of no type.
  EXPECT_EQ(40, progress.AppliedThrough("review"));
  EXPECT_EQ(40, progress.AppliedThroughAll({"stock", "person"}));
  EXPECT_EQ(-1, StreamProgress().AppliedThrough("person"));
  // Only the every-type row of a release before lanes: everything to it.
  EXPECT_EQ(10, StreamProgress({Row({}, 10)}).AppliedThrough("stock"));
}

TEST(StreamProgress, AStoreOfOneLaneGetsARowForEachLaneAtItsPosition) {
  const Lanes lanes = TwoLanes();
  ASSERT_EQ(2u, lanes.size());
  const StreamProgress before({Row({}, 99)});
  std::vector<StoredPosition> added = lanes.RowsToAdd({"kafka:g:t", 0, -1}, before);
  ASSERT_EQ(2u, added.size());
  for (const StoredPosition& row : added) EXPECT_EQ(99, row.at.position);
  EXPECT_EQ(lanes.key(0), added[0].lane);
  EXPECT_EQ(lanes.key(1), added[1].lane);
  EXPECT_EQ(99, lanes.ResumeAfter(before));
}

TEST(StreamProgress, ANewStreamGetsEveryLanesRowAtNothingAppliedAndOneLaneNone) {
  const Lanes lanes = TwoLanes();
  std::vector<StoredPosition> added = lanes.RowsToAdd({"kafka:g:t", 3, -1}, StreamProgress());
  ASSERT_EQ(2u, added.size());
  for (const StoredPosition& row : added) {
    EXPECT_EQ(-1, row.at.position);
    EXPECT_EQ(3, row.at.partition);
  }
  // With every lane's row there, a lane that never committed is known to
  // have applied nothing, whatever the others did.
  const StreamProgress progress({Row(lanes.key(0), 500), Row(lanes.key(1), -1)});
  EXPECT_EQ(-1, progress.AppliedThrough("stock"));
  EXPECT_EQ(-1, lanes.ResumeAfter(progress));
  EXPECT_TRUE(lanes.RowsToAdd({"kafka:g:t", 0, -1}, progress).empty());
  const Config config;
  EXPECT_TRUE(Lanes::Single(config).RowsToAdd({"kafka:g:t", 0, -1}, StreamProgress()).empty());
}

TEST(StreamProgress, OneLaneAfterSeveralStartsWhereTheLastOfThemWas) {
  const Config config = Parse(
      "store: {postgres: \"\", schema: s}\nentities: [person, address, stock]\n"
      "projections:\n"
      "  stocks: {from: stock}\n");
  const Lanes one = Lanes::Single(config);
  const StreamProgress progress({Row({"", "address", "person"}, 40), Row({"stock"}, 70)});
  std::vector<StoredPosition> added = one.RowsToAdd({"kafka:g:t", 0, -1}, progress);
  ASSERT_EQ(1u, added.size());
  EXPECT_TRUE(added[0].lane.empty());
  EXPECT_EQ(40, added[0].at.position);
  EXPECT_EQ(40, one.ResumeAfter(progress));
}

}  // namespace
}  // namespace denormd
