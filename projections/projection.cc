#include "projections/projection.h"

#include <map>


namespace denormd {

namespace {

std::string Truncate(const std::string& text, size_t max = 300) {
  return text.size() <= max ? text : text.substr(0, max) + "...";
}

// What differs between a bucket's expected columns and the stored ones; ""
// when nothing does.
std::string BucketColumnsDiffer(const BucketMeta& expected, const std::optional<BucketMeta>& stored) {
  if (!stored) return "its bucket columns (number, seq, members) are empty";
  std::string out;
  auto add = [&out](const std::string& column, const std::string& have, const std::string& want) {
    out += (out.empty() ? "" : "; ") + column + " is " + have + ", expected " + want;
  };
  if (stored->number != expected.number) {
    add("number", std::to_string(stored->number), std::to_string(expected.number));
  }
  if (stored->seq != expected.seq) {
    add("seq", std::to_string(stored->seq), std::to_string(expected.seq));
  }
  if (stored->members != expected.members) {
    add("members", std::to_string(stored->members), std::to_string(expected.members));
  }
  return out.empty() ? out : "bucket columns differ: " + out;
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
    } else if (it->second.bucket) {
      const std::string columns = BucketColumnsDiffer(*it->second.bucket, row.bucket);
      if (!columns.empty()) differences->push_back(where + row.id + ": " + columns);
    }
    expected.erase(it);
  }
  for (const auto& missing : expected) {
    differences->push_back(where + missing.first + ": missing, expected " +
                           Truncate(missing.second.json));
  }
}

}  // namespace denormd
