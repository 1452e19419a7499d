#include "tests/test_support.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "projections/json.h"

namespace denormd {
namespace testing {

std::string SourcePath(const std::string& relative) {
  return std::string(DENORMD_SOURCE_DIR) + "/" + relative;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string DiffCollections(const Collections& actual, const std::string& expected_file) {
  JsonDocument expected;
  Status status = ParseJson(ReadFile(expected_file), &expected);
  if (!status.ok()) return expected_file + ": " + status.ToString();
  const JsonValue& collections = expected["collections"];
  std::ostringstream diff;
  for (auto c = collections.MemberBegin(); c != collections.MemberEnd(); ++c) {
    std::string name = c->name.GetString();
    auto found = actual.find(name);
    std::map<std::string, std::string> docs;
    if (found != actual.end()) docs = found->second;
    for (auto d = c->value.MemberBegin(); d != c->value.MemberEnd(); ++d) {
      std::string id = d->name.GetString();
      auto it = docs.find(id);
      if (it == docs.end()) {
        diff << name << "/" << id << ": missing, expected " << ToJson(d->value) << "\n";
        continue;
      }
      JsonDocument doc;
      if (!ParseJson(it->second, &doc).ok() || !JsonEquals(doc, d->value)) {
        diff << name << "/" << id << ": got " << it->second << "\n    expected "
             << ToJson(d->value) << "\n";
      }
      docs.erase(it);
    }
    for (const auto& extra : docs) {
      diff << name << "/" << extra.first << ": unexpected " << extra.second << "\n";
    }
  }
  for (const auto& entry : actual) {
    if (!collections.HasMember(entry.first.c_str()) && !entry.second.empty()) {
      diff << "unexpected collection " << entry.first << "\n";
    }
  }
  return diff.str();
}

void ExpectedCounts(const std::string& expected_file, uint64_t* stale, uint64_t* dead) {
  JsonDocument expected;
  ASSERT_TRUE(ParseJson(ReadFile(expected_file), &expected).ok());
  *stale = expected["stale"].GetUint64();
  *dead = expected["dead"].GetUint64();
}

}  // namespace testing
}  // namespace denormd
