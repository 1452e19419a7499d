// Shared helpers for the test executables.
#ifndef DENORMD_TESTS_TEST_SUPPORT_H_
#define DENORMD_TESTS_TEST_SUPPORT_H_

#include <map>
#include <string>
#include <vector>

#include "config/config.h"

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

// The PostgreSQL server of the test run, from $DENORMD_TEST_POSTGRES (set by
// scripts/test.sh). Fails the test when unset: integration tests never skip.
std::string TestPostgresUrl();

// A schema name unique to the running test ("t_<suite>_<test>", lowercase).
std::string TestSchemaName();

// Loads a config from the source tree, sets its schema to `schema` and drops
// that schema (CASCADE) in the test database so the test starts clean.
Config LoadTestConfig(const std::string& relative_path, const std::string& schema);

// Every collection table of `config`'s schema, read with plain SQL.
Collections ReadCollections(const Config& config);

// Runs one SQL statement against the test database; returns rows, fields
// separated by tabs.
std::vector<std::string> Sql(const std::string& statement);

// Runs the denormd binary with `args` and DENORMD_POSTGRES set to the test
// database; captures stdout+stderr into *output. Returns the exit code.
int RunDenormd(const std::vector<std::string>& args, std::string* output);

// Writes `text` to a new file in a per-test temporary directory; returns its path.
std::string WriteTempFile(const std::string& name, const std::string& text);

}  // namespace testing
}  // namespace denormd

#endif  // DENORMD_TESTS_TEST_SUPPORT_H_
