#include "tests/article_changes.h"

#include <optional>

#include <gtest/gtest.h>

#include "formats/format_registry.h"
#include "tests/test_support.h"

namespace denormd {
namespace testing {

void Replace(std::string* text, const std::string& from, const std::string& to) {
  const size_t at = text->find(from);
  ASSERT_NE(std::string::npos, at) << from;
  text->replace(at, from.size(), to);
}

const std::vector<ConfigChange>& Changes() {
  static const std::vector<ConfigChange> changes = {
      {"AddFieldToEmbeddedSelect",
       [](std::string* t) {
         Replace(t, "select: [line1, line2, city, state, zip]",
                 "select: [line1, line2, city, state, zip, country]");
       }},
      {"AddProjection",
       [](std::string* t) {
         Replace(t, "  stocks:\n    from: stock\n",
                 "  stocks:\n    from: stock\n  book_titles:\n    from: book\n"
                 "    include: [name]\n    fields:\n"
                 "      publisher: {lookup: publisher, by: pubId, select: {name: name}}\n");
       }},
      {"ChangeViaRelation",
       [](std::string* t) {
         // The authors' books embedded through the same field, ordered by
         // name: a new index relation (authorIds with a sort key).
         Replace(t, "books: {ids: book, via: authorIds}",
                 "books: {embed: book, via: authorIds, order_by: name, select: [id, name]}");
       }},
      {"RemoveProjection",
       [](std::string* t) {
         Replace(t, "  portfolios:                   # holdings stay references: a quote change "
                    "touches one stock document\n    from: person\n"
                    "    include: [firstName, lastName, holdings]\n",
                 "");
       }},
      {"ChangeBucketSize", [](std::string* t) { Replace(t, "size: 100", "size: 7"); }},
  };
  return changes;
}

std::string ArticleText(const std::string& schema, const std::vector<const ConfigChange*>& edits) {
  std::string text = ReadFile(SourcePath("tests/data/article/config.yaml"));
  Replace(&text, "schema: article", "schema: " + schema);
  for (const ConfigChange* change : edits) change->edit(&text);
  return text;
}

Config Parse(const std::string& text) {
  std::vector<ConfigError> errors;
  std::optional<Config> config = ParseConfig(text, "test.yaml", &errors);
  for (const ConfigError& error : errors) ADD_FAILURE() << error.ToString("test.yaml");
  return config ? *config : Config();
}

DocumentSet ReadDocumentSet(const Config& config) {
  DocumentSet set = EmptyDocumentSet(config);
  for (auto& collection : ReadCollections(config)) {
    set.collections[collection.first] = std::move(collection.second);
  }
  return set;
}

std::string LogSlice(const std::string& log, size_t from, size_t to, const std::string& name) {
  const std::string text = ReadFile(log);
  std::string out;
  size_t line = 0;
  for (size_t at = 0; at < text.size(); ++line) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (line >= from && line < to) out += text.substr(at, end - at) + "\n";
    at = end + 1;
  }
  return WriteTempFile(name, out);
}

}  // namespace testing
}  // namespace denormd
