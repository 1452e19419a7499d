// Seeded mutation fuzzing, in the suite: the event decoder and the config
// parser are given mutations of the corpus in tests/data/fuzz (one seed per
// file) and must keep their contracts (fuzz_targets.h): no crash, no
// exception, a reason for every refusal. Events the decoder accepts are also
// applied to the article model in memory, which must stay exact (verify).
//
// Bounded by DENORMD_FUZZ_ITERATIONS (per target; default 20,000 events and
// 4,000 configs); DENORMD_FUZZ_SEED repeats a run (the seed is printed). A
// failing input is written to a file whose path the failure names; add it to
// the corpus once fixed.
#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "formats/native_format.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/mutator.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

std::vector<std::string> Corpus(const std::string& folder) {
  const std::string dir = testing::SourcePath("tests/data/fuzz/" + folder);
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* entry = readdir(d)) {
      if (entry->d_name[0] != '.') names.push_back(entry->d_name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());  // the same order on every machine
  std::vector<std::string> seeds;
  for (const std::string& name : names) seeds.push_back(testing::ReadFile(dir + "/" + name));
  return seeds;
}

uint64_t EnvNumber(const char* name, uint64_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::strtoull(value, nullptr, 10) : fallback;
}

uint64_t Seed() {
  static const uint64_t seed = EnvNumber("DENORMD_FUZZ_SEED", std::random_device()());
  return seed;
}

// Keeps a failing input for the person who reads the failure.
std::string SaveFailure(const std::string& target, const std::string& input) {
  const std::string path = testing::WriteTempFile("fuzz-" + target + "-failure", input);
  return path + " (seed " + std::to_string(Seed()) + ", " + std::to_string(input.size()) +
         " bytes)";
}

TEST(Fuzz, EventDecoderAndEngine) {
  const std::vector<std::string> seeds = Corpus("events");
  ASSERT_GE(seeds.size(), 20u) << "the events corpus is missing";
  const uint64_t iterations = EnvNumber("DENORMD_FUZZ_ITERATIONS", 20000);
  std::printf("fuzz events: seed %llu, %llu iterations, %zu seeds\n",
              static_cast<unsigned long long>(Seed()),
              static_cast<unsigned long long>(iterations), seeds.size());
  std::fflush(stdout);  // seen even when a sanitizer aborts the run
  testing::InMemory engine(testing::ReadFile(testing::SourcePath("tests/data/article/config.yaml")));
  fuzz::InputMutator mutator(Seed(), fuzz::JsonTokens());
  std::vector<std::string> pending;  // accepted lines, applied in batches
  uint64_t accepted_total = 0;
  uint64_t refused_total = 0;  // applied alone and refused as invalid input
  for (uint64_t i = 0; i < iterations; ++i) {
    const std::string& seed = seeds[mutator.Below(seeds.size())];
    const std::string& other = seeds[mutator.Below(seeds.size())];
    const std::string input = mutator.Mutate(seed, other, 64 * 1024);
    std::vector<EntityEvent> accepted;
    const std::string broken =
        fuzz::CheckEventDecoding(engine.decoder(), engine.config(), input, &accepted);
    ASSERT_EQ("", broken) << "input kept in " << SaveFailure("event", input);
    if (!accepted.empty() && input.find('\n') == std::string::npos) pending.push_back(input);
    if (pending.size() == 50 || (i + 1 == iterations && !pending.empty())) {
      // As the daemon's BatchLoop does: a batch the engine refuses as invalid
      // input (e.g. two documents of a shared collection with one key) is
      // applied event by event and the refused events are dropped (the daemon
      // dead-letters them). Any other error is a bug.
      std::string broken_batch;
      BatchStats stats;
      Status status = engine.TryApply(pending, &stats);
      if (status.IsInvalidInput()) {
        status = Status::Ok();
        for (size_t k = 0; k < pending.size() && status.ok(); ++k) {
          status = engine.TryApply({pending[k]}, &stats);
          if (status.IsInvalidInput()) {
            ++refused_total;
            status = Status::Ok();
          } else {
            accepted_total += status.ok() ? 1 : 0;
          }
        }
      } else if (status.ok()) {
        accepted_total += pending.size();
      }
      if (!status.ok()) {
        std::string batch;
        for (const std::string& line : pending) batch += line + "\n";
        FAIL() << status.ToString() << "; batch kept in " << SaveFailure("batch", batch);
      }
      pending.clear();
    }
  }
  std::printf("fuzz events: %llu applied, %llu refused by the engine\n",
              static_cast<unsigned long long>(accepted_total),
              static_cast<unsigned long long>(refused_total));
  const std::vector<std::string> differences = engine.Differences();
  EXPECT_TRUE(differences.empty()) << differences.size() << " differences, first: "
                                   << differences.front();
}

TEST(Fuzz, ConfigParser) {
  const std::vector<std::string> seeds = Corpus("configs");
  ASSERT_GE(seeds.size(), 5u) << "the configs corpus is missing";
  const uint64_t iterations = EnvNumber("DENORMD_FUZZ_ITERATIONS", 4000);
  std::printf("fuzz configs: seed %llu, %llu iterations, %zu seeds\n",
              static_cast<unsigned long long>(Seed()),
              static_cast<unsigned long long>(iterations), seeds.size());
  std::fflush(stdout);  // seen even when a sanitizer aborts the run
  for (const std::string& seed : seeds) {
    ASSERT_EQ("", fuzz::CheckConfigParsing(seed)) << SaveFailure("config-seed", seed);
  }
  fuzz::InputMutator mutator(Seed() + 1, fuzz::YamlTokens());
  uint64_t parsed = 0;
  for (uint64_t i = 0; i < iterations; ++i) {
    const std::string input = mutator.Mutate(seeds[mutator.Below(seeds.size())],
                                             seeds[mutator.Below(seeds.size())], 64 * 1024);
    ASSERT_EQ("", fuzz::CheckConfigParsing(input)) << "input kept in "
                                                   << SaveFailure("config", input);
    std::vector<ConfigError> errors;
    if (ParseConfig(input, "fuzz.yaml", &errors)) ++parsed;
  }
  std::printf("fuzz configs: %llu of the mutations were valid configs\n",
              static_cast<unsigned long long>(parsed));
}

}  // namespace
}  // namespace denormd
