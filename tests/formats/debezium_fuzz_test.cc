// Seeded mutation fuzzing of the Debezium decoder: the captured records
// (tests/data/debezium/records-*.jsonl) mutated, value and key, on their
// topics. The decoder must keep the Decoder contract (fuzz_targets.h: no
// crash, no exception, a reason for every refusal, accepted events of
// configured types with valid ids); accepted records are applied by the
// in-memory engine, which must stay exact (verify).
//
// DENORMD_FUZZ_ITERATIONS (default 20,000) and DENORMD_FUZZ_SEED as in
// tests/fuzz/fuzz_test.cc.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "formats/input_decoder.h"
#include "projections/json.h"
#include "projections/limits.h"
#include "tests/fuzz/mutator.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

uint64_t EnvNumber(const char* name, uint64_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::strtoull(value, nullptr, 10) : fallback;
}

std::vector<RawRecord> Seeds() {
  std::vector<RawRecord> records;
  for (const char* file : {"tests/data/debezium/records-schemas.jsonl",
                           "tests/data/debezium/records-noschemas.jsonl"}) {
    std::ifstream in(testing::SourcePath(file));
    std::string line;
    while (std::getline(in, line)) {
      JsonDocument doc;
      EXPECT_TRUE(ParseJson(line, &doc).ok());
      RawRecord record;
      record.topic = doc["topic"].GetString();
      if (!doc["key"].IsNull()) record.key = ToJson(doc["key"]);
      if (!doc["value"].IsNull()) record.value = ToJson(doc["value"]);
      records.push_back(std::move(record));
    }
  }
  return records;
}

// The Decoder contract on one record ("" when it held).
std::string Check(const Decoder& decoder, const Config& config, const RawRecord& record) {
  std::vector<EntityEvent> events;
  bool skipped = false;
  Status status;
  try {
    status = decoder.Decode(record, &events, &skipped);
  } catch (const std::exception& e) {
    return std::string("the decoder threw: ") + e.what();
  }
  if (!status.ok()) {
    if (!status.IsInvalidInput()) return "not InvalidInput but " + status.ToString();
    return status.message().empty() ? "a refusal without a reason" : "";
  }
  if (skipped) return events.empty() ? "" : "skipped with events";
  if (events.size() != 1) return "a record made " + std::to_string(events.size()) + " events";
  const EntityEvent& event = events[0];
  if (!config.HasEntity(event.key.type)) return "accepted unknown type " + event.key.type;
  if (event.key.id.empty() || event.key.id.size() > kMaxIdBytes) return "accepted a bad id";
  if (!event.version) return "accepted an event without a version";
  if (event.op == EventOp::kUpsert && (!event.data || !event.data->IsObject())) {
    return "accepted an upsert whose data is not an object";
  }
  if (event.op == EventOp::kDelete && event.data) return "a delete carries data";
  if (event.op == EventOp::kPatch) return "a patch";
  return "";
}

TEST(DebeziumFuzz, DecoderKeepsItsContractAndTheEngineStaysExact) {
  const uint64_t seed = EnvNumber("DENORMD_FUZZ_SEED", std::random_device()());
  const uint64_t iterations = EnvNumber("DENORMD_FUZZ_ITERATIONS", 20000);
  std::printf("fuzz debezium: seed %llu, %llu iterations\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(iterations));
  const std::vector<RawRecord> seeds = Seeds();
  ASSERT_EQ(74u, seeds.size());
  testing::InMemory engine(
      testing::ReadFile(testing::SourcePath("tests/data/debezium/config.yaml")));
  const InputDecoder decoder(engine.config());
  fuzz::InputMutator mutator(seed, fuzz::JsonTokens());
  std::vector<RawRecord> pending;
  uint64_t accepted = 0, dead = 0;
  for (uint64_t i = 0; i < iterations; ++i) {
    RawRecord record = seeds[mutator.Below(seeds.size())];
    const RawRecord& other = seeds[mutator.Below(seeds.size())];
    record.at = {"kafka:fuzz:" + record.topic, 0, static_cast<int64_t>(i)};
    if (record.value && mutator.Below(4) != 0) {
      record.value = mutator.Mutate(*record.value, other.value.value_or(""), 64 * 1024);
    } else if (record.key) {
      record.key = mutator.Mutate(*record.key, other.key.value_or(""), 4096);
    }
    const std::string broken = Check(decoder, engine.config(), record);
    ASSERT_EQ("", broken) << "topic " << record.topic << "\nkey " << record.key.value_or("(null)")
                          << "\nvalue " << record.value.value_or("(null)") << "\nseed " << seed;
    pending.push_back(std::move(record));
    if (pending.size() == 50 || i + 1 == iterations) {
      // Dead letters included: the engine stores them with the batch.
      BatchStats stats;
      Status status = engine.applier().Apply(&engine.store(), DecodeBatch(decoder, pending), &stats);
      if (status.IsInvalidInput()) {  // as the daemon's BatchLoop: record by record
        for (const RawRecord& one : pending) {
          BatchStats single;
          Status alone = engine.applier().Apply(&engine.store(), DecodeBatch(decoder, {one}), &single);
          ASSERT_TRUE(alone.ok() || alone.IsInvalidInput()) << alone.ToString();
          stats.Add(single);
        }
      } else {
        ASSERT_TRUE(status.ok()) << status.ToString() << " (seed " << seed << ")";
      }
      accepted += stats.applied + stats.stale;
      dead += stats.dead_letters;
      pending.clear();
    }
  }
  std::printf("fuzz debezium: %llu events applied or stale, %llu dead letters\n",
              static_cast<unsigned long long>(accepted), static_cast<unsigned long long>(dead));
  EXPECT_GT(accepted, 0u);
  EXPECT_GT(dead, 0u);
  const std::vector<std::string> differences = engine.Differences();
  EXPECT_TRUE(differences.empty()) << differences.size() << " differences, first: "
                                   << differences.front();
}

}  // namespace
}  // namespace denormd
