// Shared helpers for the test executables.
#ifndef DENORMD_TESTS_TEST_SUPPORT_H_
#define DENORMD_TESTS_TEST_SUPPORT_H_

#include <map>
#include <string>

namespace denormd {
namespace testing {

// Absolute path of a file in the source tree, e.g. "tests/data/article/config.yaml".
std::string SourcePath(const std::string& relative);

// Whole contents of a file; fails the test (ADD_FAILURE) and returns "" if unreadable.
std::string ReadFile(const std::string& path);

// Documents by collection and id, as JSON text.
using Collections = std::map<std::string, std::map<std::string, std::string>>;

// Compares `actual` with the "collections" object of an expected-documents
// file (tests/data/article/expected*.json). Returns "" when every collection
// holds exactly the expected documents, else one line per difference.
std::string DiffCollections(const Collections& actual, const std::string& expected_file);

// The "stale" and "dead" counts of an expected-documents file.
void ExpectedCounts(const std::string& expected_file, uint64_t* stale, uint64_t* dead);

}  // namespace testing
}  // namespace denormd

#endif  // DENORMD_TESTS_TEST_SUPPORT_H_
