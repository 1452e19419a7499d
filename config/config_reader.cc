// The reader under the configuration parser (config_reader.h): the generic
// reads every section is made of, the error messages they produce, and the
// YAML-to-JSON conversion of {value: ...}.
#include "config/config_reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace denormd {
namespace config_internal {
namespace {

// Tables (and the indexes refs_by_owner and, of older stores, refs_by_entity,
// in the same namespace) denormd keeps
// next to the collections, in the same schema: those
// connectors/postgres_store.cc creates (tests/connectors/reserved_tables_test.cc
// keeps the two in step), and the change feed's outbox and feed_state.
const KeyList kReservedTables = {"entities",      "refs",         "refs_by_entity", "refs_by_owner",
                                 "ref_counts",    "positions",    "locks",          "writers",
                                 "meta",          "dead_letters", "outbox",         "feed_state",
                                 "apply_journal", "fanout_stats"};
// The longest suffix of the names made for a collection: its indexes
// ("_by_number") on the table `denormd apply` builds beside it
// ("<collection>__next_by_number"). PostgreSQL truncates names past 63
// bytes, so a collection name is at most 63 - 16 bytes.
constexpr size_t kLongestIndexSuffix = 16;

// Levenshtein distance, for "did you mean" suggestions.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// A lowercase SQL identifier that needs no quoting: [a-z_][a-z0-9_]*, <= 63.
bool IsSqlIdentifier(const std::string& s) {
  if (s.empty() || s.size() > 63 || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// A YAML 1.2 decimal number ("+007", "-1.5e3", ".5", "1.") rewritten as JSON
// ("7", "-1.5e3", "0.5", "1.0"). False if `s` is not one.
bool DecimalToJson(const std::string& s, std::string* json) {
  size_t i = 0;
  std::string sign;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) sign = s[i++] == '-' ? "-" : "";
  const auto digits = [&s, &i]() {
    const size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return s.substr(start, i - start);
  };
  std::string whole = digits();
  std::string fraction;
  const bool has_point = i < s.size() && s[i] == '.';
  if (has_point) {
    ++i;
    fraction = digits();
  }
  if (whole.empty() && fraction.empty()) return false;
  std::string exponent;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    exponent = "e";
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) exponent += s[i++];
    const std::string exponent_digits = digits();
    if (exponent_digits.empty()) return false;
    exponent += exponent_digits;
  }
  if (i != s.size()) return false;
  whole.erase(0, std::min(whole.find_first_not_of('0'), whole.size()));
  if (whole.empty()) whole = "0";
  *json = sign + whole + (has_point ? "." + (fraction.empty() ? "0" : fraction) : "") + exponent;
  return true;
}

// A plain (unquoted, untagged) scalar resolved as the YAML 1.2 core schema
// does: booleans, integers (also 0x.. and 0o..) and floats; else a string.
// .inf and .nan have no JSON form and stay strings.
std::string PlainScalarToJson(const std::string& s) {
  if (s == "true" || s == "True" || s == "TRUE") return "true";
  if (s == "false" || s == "False" || s == "FALSE") return "false";
  std::string json;
  if (DecimalToJson(s, &json)) return json;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
    const int base = s[1] == 'x' ? 16 : 8;
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(s.c_str() + 2, &end, base);
    if (errno == 0 && *end == '\0' && std::isalnum(static_cast<unsigned char>(s[2]))) {
      return std::to_string(n);
    }
  }
  json.clear();
  AppendJsonString(s, &json);
  return json;
}

}  // namespace

bool Contains(const KeyList& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

std::string JoinKeys(const KeyList& keys) {
  std::string out;
  for (const std::string& key : keys) out += (out.empty() ? "" : ", ") + key;
  return out;
}

std::string JoinChoices(const KeyList& choices) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  return out;
}

// " (did you mean "x"?)" for the closest candidate at distance <= 2 (and
// shorter than the word itself, so that "x" does not suggest "by"); else "".
std::string Suggestion(const std::string& word, const KeyList& candidates) {
  const std::string* best = nullptr;
  size_t best_distance = 3;
  for (const std::string& candidate : candidates) {
    const size_t distance = EditDistance(word, candidate);
    if (distance < best_distance && distance < word.size()) {
      best = &candidate;
      best_distance = distance;
    }
  }
  return best ? " (did you mean " + Quote(*best) + "?)" : "";
}

// A Kafka topic name: 1..249 of [a-zA-Z0-9._-], not "." or "..".
bool IsKafkaTopicName(const std::string& s) {
  if (s.empty() || s.size() > 249 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

ConfigPlace PlaceOf(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return {};
  return {mark.line + 1, mark.column + 1};
}

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar: return "the scalar " + Quote(node.Scalar());
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    default: return "nothing";
  }
}

// "parent.key"; an empty key shows as "".
std::string Child(const std::string& where, const std::string& key) {
  const std::string shown = key.empty() ? "\"\"" : key;
  return where.empty() ? shown : where + "." + shown;
}

// ----------------------------------------------------------------------------
// {value: X} as compact JSON.

void AppendJsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\t': *out += "\\t"; break;
      case '\r': *out += "\\r"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
          *out += buffer;
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

// Appends `node` as compact JSON; InvalidInput when it has no JSON form.
Status AppendJson(const YAML::Node& node, std::string* out) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar: {
      const std::string& tag = node.Tag();
      const bool plain = tag == "?" || tag == "tag:yaml.org,2002:int" ||
                         tag == "tag:yaml.org,2002:float" || tag == "tag:yaml.org,2002:bool";
      if (plain) {
        *out += PlainScalarToJson(node.Scalar());
      } else {
        AppendJsonString(node.Scalar(), out);
      }
      return Status::Ok();
    }
    case YAML::NodeType::Sequence: {
      out->push_back('[');
      bool first = true;
      for (const YAML::Node& element : node) {
        if (!first) out->push_back(',');
        first = false;
        DENORMD_RETURN_IF_ERROR(AppendJson(element, out));
      }
      out->push_back(']');
      return Status::Ok();
    }
    case YAML::NodeType::Map: {
      out->push_back('{');
      std::set<std::string> seen;
      for (const auto& entry : node) {
        if (!entry.first.IsScalar()) return Status::InvalidInput("keys in a value must be strings");
        if (!seen.insert(entry.first.Scalar()).second) {
          return Status::InvalidInput("duplicate key " + Quote(entry.first.Scalar()) + " in a value");
        }
        if (seen.size() > 1) out->push_back(',');
        AppendJsonString(entry.first.Scalar(), out);
        out->push_back(':');
        DENORMD_RETURN_IF_ERROR(AppendJson(entry.second, out));
      }
      out->push_back('}');
      return Status::Ok();
    }
    default:
      *out += "null";
      return Status::Ok();
  }
}

// ----------------------------------------------------------------------------
// The reads.

bool ConfigReader::ExpectMap(const Item& item) {
  if (item.node.IsMap()) return true;
  Error(item, "expected a map, found " + Describe(item.node));
  return false;
}

// The map's entries in file order; reports non-string and duplicate keys and
// leaves them out.
std::vector<Entry> ConfigReader::Entries(const Item& item) {
  std::vector<Entry> entries;
  std::map<std::string, int> first_line;
  for (const auto& pair : item.node) {
    const ConfigPlace key_place = PlaceOf(pair.first);
    if (!pair.first.IsScalar()) {
      Error(key_place, item.where, "keys must be strings, found " + Describe(pair.first));
      continue;
    }
    const std::string key = pair.first.Scalar();
    const auto [it, inserted] = first_line.emplace(key, key_place.line);
    if (!inserted) {
      Error(key_place, Child(item.where, key),
            "duplicate key " + Quote(key) + " (first at line " + std::to_string(it->second) + ")");
      continue;
    }
    const ConfigPlace value_place = pair.second.IsNull() ? key_place : PlaceOf(pair.second);
    Item value{pair.second, Child(item.where, key), value_place};
    entries.push_back(Entry{key, key_place, std::move(value)});
  }
  return entries;
}

// The map's entries by key, reporting keys not in `allowed`. A key that is in
// `known_elsewhere` is named as misplaced in `context` rather than unknown.
std::map<std::string, Item> ConfigReader::ReadKeys(const Item& item, const KeyList& allowed,
                                                   const std::string& context,
                                                   const KeyList& known_elsewhere) {
  std::map<std::string, Item> keys;
  for (Entry& entry : Entries(item)) {
    if (Contains(allowed, entry.key)) {
      keys.emplace(entry.key, std::move(entry.value));
    } else if (Contains(known_elsewhere, entry.key)) {
      Error(entry.key_place, entry.value.where,
            Quote(entry.key) + " is not allowed in " + context + " (allowed: " +
                JoinKeys(allowed) + ")");
    } else {
      Error(entry.key_place, entry.value.where,
            "unknown key " + Quote(entry.key) + Suggestion(entry.key, allowed));
      unknown_keys_[item.where].push_back({entry.key, entry.key_place});
    }
  }
  return keys;
}

bool ConfigReader::Require(const Item& parent, const std::map<std::string, Item>& keys,
                           const std::string& key) {
  if (keys.count(key)) return true;
  // A misspelling of it ("vai" for "via") was reported as an unknown key with
  // a suggestion: the missing key is said at the misspelling, after that,
  // so the useful message comes first.
  auto unknown = unknown_keys_.find(parent.where);
  if (unknown != unknown_keys_.end()) {
    for (const auto& misspelled : unknown->second) {
      if (!Suggestion(misspelled.first, {key}).empty()) {
        Error(misspelled.second, Child(parent.where, key),
              "missing required key " + Quote(key) + " (given as " + Quote(misspelled.first) +
                  "?)");
        return false;
      }
    }
  }
  Error(parent.place, Child(parent.where, key), "missing required key " + Quote(key));
  return false;
}

bool ConfigReader::ReadString(const Item& item, std::string* out) {
  if (!item.node.IsScalar()) {
    Error(item, "expected a string, found " + Describe(item.node));
    return false;
  }
  *out = item.node.Scalar();
  return true;
}

bool ConfigReader::ReadNonEmptyString(const Item& item, std::string* out) {
  if (!ReadString(item, out)) return false;
  if (!out->empty()) return true;
  Error(item, "must not be empty");
  return false;
}

bool ConfigReader::ReadUint(const Item& item, uint64_t min, uint64_t* out) {
  const std::string wanted =
      min == 1 ? "a positive integer" : "an integer >= " + std::to_string(min);
  const std::string text = item.node.IsScalar() ? item.node.Scalar() : "";
  const bool digits = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
  errno = 0;
  const unsigned long long value = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE || value < min) {
    Error(item, "must be " + wanted + ", found " + Describe(item.node));
    return false;
  }
  *out = value;
  return true;
}

bool ConfigReader::ReadBoundedUint(const Item& item, uint64_t min, uint64_t max,
                                   const std::string& why, uint64_t* out) {
  uint64_t value = 0;
  if (!ReadUint(item, min, &value)) return false;
  if (value > max) {
    Error(item, "must be at most " + std::to_string(max) + " (" + why + "), found " +
                    std::to_string(value));
    return false;
  }
  *out = value;
  return true;
}

bool ConfigReader::ReadStringList(const Item& item, bool non_empty,
                                  std::vector<std::string>* out) {
  if (!item.node.IsSequence()) {
    Error(item, "expected a list, found " + Describe(item.node));
    return false;
  }
  if (non_empty && item.node.size() == 0) {
    Error(item, "must not be an empty list");
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < item.node.size(); ++i) {
    const YAML::Node element = item.node[i];
    const Item element_item{element, item.where + "[" + std::to_string(i) + "]",
                            element.IsNull() ? item.place : PlaceOf(element)};
    std::string value;
    if (ReadNonEmptyString(element_item, &value)) {
      out->push_back(value);
    } else {
      ok = false;
    }
  }
  return ok;
}

bool ConfigReader::ReadPath(const Item& item, Path* out) {
  std::string text;
  if (!ReadString(item, &text)) return false;
  const Status status = ParsePath(text, out);
  if (status.ok()) return true;
  Error(item, status.message());
  return false;
}

bool ConfigReader::ReadOrderBy(const Item& item, OrderBy* out) {
  std::string text;
  if (!ReadString(item, &text)) return false;
  const bool descending = !text.empty() && text[0] == '-';
  Path path;
  const Status status = ParsePath(descending ? text.substr(1) : text, &path);
  if (!status.ok()) {
    Error(item, "bad order_by " + Quote(text) + " (a path, optionally after '-'): " +
                    status.message());
    return false;
  }
  out->present = true;
  out->descending = descending;
  out->path = std::move(path);
  return true;
}

bool ConfigReader::ReadEntityType(const Item& item, std::string* out) {
  if (!ReadNonEmptyString(item, out)) return false;
  if (!entities_known_ || entities_.count(*out)) return true;
  Error(item, "unknown entity type " + Quote(*out) + " (not in entities)" +
                  Suggestion(*out, KeyList(entities_.begin(), entities_.end())));
  return false;
}

bool ConfigReader::ReadSqlName(const Item& item, const std::string& what, const std::string& name,
                               bool check_reserved) {
  if (!IsSqlIdentifier(name)) {
    Error(item, what + " " + Quote(name) +
                    " is not a valid SQL identifier (lowercase letters, digits and '_', "
                    "not starting with a digit, at most 63 characters)");
    return false;
  }
  if (check_reserved && name.size() + kLongestIndexSuffix > 63) {
    Error(item, what + " " + Quote(name) + " is " + std::to_string(name.size()) +
                    " characters long; a collection name is at most " +
                    std::to_string(63 - kLongestIndexSuffix) +
                    " (PostgreSQL would truncate the names of its indexes and of the table "
                    "`denormd apply` builds beside it)");
    return false;
  }
  const auto ends_with = [&name](const std::string& suffix) {
    return name.size() > suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (check_reserved && (ends_with("__next") || ends_with("__plan"))) {
    Error(item, what + " " + Quote(name) +
                    ": names ending in __next or __plan are the tables `denormd apply` and "
                    "`denormd plan` build beside a collection");
    return false;
  }
  if (check_reserved && Contains(kReservedTables, name)) {
    Error(item, what + " " + Quote(name) + " clashes with a table denormd keeps itself (" +
                    JoinKeys(kReservedTables) + ")");
    return false;
  }
  return true;
}

void ConfigReader::DeclareEntityTypes(const std::vector<std::string>& types) {
  entities_known_ = true;
  entities_.insert(types.begin(), types.end());
}

}  // namespace config_internal
}  // namespace denormd
