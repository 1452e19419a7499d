// InputMutator: the mutations a coverage-guided fuzzer would try, driven by
// a seeded generator so a failing run can be repeated exactly: bit flips,
// interesting bytes, deleted, duplicated and spliced ranges, truncation, and
// tokens of the input's language (JSON or YAML) inserted at random places.
#ifndef DENORMD_TESTS_FUZZ_MUTATOR_H_
#define DENORMD_TESTS_FUZZ_MUTATOR_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace denormd {
namespace fuzz {

class InputMutator {
 public:
  // `tokens`: fragments of the input language worth inserting whole.
  InputMutator(uint64_t seed, std::vector<std::string> tokens);

  // One to four stacked mutations of `input`; `other` is spliced in by some.
  // The result is at most `max_bytes` long.
  std::string Mutate(const std::string& input, const std::string& other, size_t max_bytes);

  // A uniformly chosen index below `n` (n > 0).
  size_t Below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(random_); }

 private:
  void MutateOnce(std::string* data, const std::string& other);

  std::mt19937_64 random_;
  std::vector<std::string> tokens_;
};

// Tokens of event JSON (keys, ops, edge-case numbers and strings, nesting).
std::vector<std::string> JsonTokens();
// Tokens of the YAML configuration (its keys, derivations, YAML syntax).
std::vector<std::string> YamlTokens();

}  // namespace fuzz
}  // namespace denormd

#endif  // DENORMD_TESTS_FUZZ_MUTATOR_H_
