#include "projections/projection.h"

#include <map>

namespace denormd {

namespace {

std::string Truncate(const std::string& text, size_t max = 300) {
  return text.size() <= max ? text : text.substr(0, max) + "...";
}

}  // namespace

void Projection::CompareDocuments(std::vector<DocumentRow> expected_rows,
                                  const std::vector<DocumentRow>& stored,
                                  std::vector<std::string>* differences) const {
  std::map<std::string, DocumentRow> expected;
  for (DocumentRow& row : expected_rows) expected[row.id] = std::move(row);
  const std::string where = config_.name + " (" + config_.collection + ") ";
  for (const DocumentRow& row : stored) {
    auto it = expected.find(row.id);
    if (it == expected.end()) {
      differences->push_back(where + row.id + ": unexpected document " + Truncate(row.json));
      continue;
    }
    JsonDocument a, b;
    const bool same = ParseJson(row.json, &a).ok() && ParseJson(it->second.json, &b).ok() &&
                      JsonEquals(a, b) && row.pk == it->second.pk;
    if (!same) {
      differences->push_back(where + row.id + ": differs\n    stored:   " + Truncate(row.json) +
                             "\n    expected: " + Truncate(it->second.json));
    }
    expected.erase(it);
  }
  for (const auto& missing : expected) {
    differences->push_back(where + missing.first + ": missing, expected " +
                           Truncate(missing.second.json));
  }
}

}  // namespace denormd
