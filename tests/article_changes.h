// Changes of the article config (tests/data/article/config.yaml) made to its
// YAML text, for the tests of `denormd plan` and `apply` on PostgreSQL
// (tests/daemon/apply_test.cc) and in memory
// (tests/daemon/admin_memory_equals_postgres_test.cc).
#ifndef DENORMD_TESTS_ARTICLE_CHANGES_H_
#define DENORMD_TESTS_ARTICLE_CHANGES_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "config/config.h"
#include "projections/document_set.h"

namespace denormd {
namespace testing {

// One change of the article config, made to its YAML text.
struct ConfigChange {
  const char* name;
  std::function<void(std::string*)> edit;
};

// Replaces the first `from` in *text with `to`; fails the test when absent.
void Replace(std::string* text, const std::string& from, const std::string& to);

// AddFieldToEmbeddedSelect, AddProjection, ChangeViaRelation,
// RemoveProjection, ChangeBucketSize: in that order.
const std::vector<ConfigChange>& Changes();

// The article config text on `schema`, with `edits` made.
std::string ArticleText(const std::string& schema, const std::vector<const ConfigChange*>& edits);

// `text` parsed; the test fails on an error.
Config Parse(const std::string& text);

// The events of a log file from line `from` (0-based) to `to` (exclusive),
// as a file of their own named `name`.
std::string LogSlice(const std::string& log, size_t from, size_t to, const std::string& name);

// The documents of `config`'s schema in the test database, with its bucket
// shapes.
DocumentSet ReadDocumentSet(const Config& config);

}  // namespace testing
}  // namespace denormd

#endif  // DENORMD_TESTS_ARTICLE_CHANGES_H_
