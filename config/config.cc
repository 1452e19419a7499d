// Parsing and validation of the denormd configuration (see config.h and
// docs/configuration.md).
//
// The parser walks the YAML tree once, filling the plain structs of config.h
// and recording every problem it meets as a ConfigError; it never stops at the
// first one. Checks that need the whole file (entity types, collections shared
// by several projections) run after the walk. yaml-cpp exceptions are caught
// at the boundary: nothing here throws to the caller.
#include "config/config.h"

#include "common/text.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace denormd {
namespace {

using KeyList = std::vector<std::string>;

const KeyList kTopKeys = {"source", "store", "batch", "retention", "limits", "log", "entities",
                          "projections", "feed"};
const KeyList kSourceKeys = {"kafka"};
const KeyList kKafkaKeys = {"brokers", "topics", "group", "dead_letter_topic", "properties"};
const KeyList kTopicKeys = {"topic", "format", "entity", "id_columns", "json_columns"};
const KeyList kDebeziumOnlyKeys = {"entity", "id_columns", "json_columns"};
// Upper bounds of the numbers `check` accepts: past them a value fails or
// misbehaves at run time (docs/architecture.md, "Limits and bad input").
constexpr uint64_t kMaxConnectTimeoutS = 3600;
constexpr uint64_t kMaxPostgresMs = 2147483647;  // PostgreSQL's timeouts are int milliseconds
constexpr uint64_t kMaxBatchEvents = 1000000;
constexpr uint64_t kMaxEventBytes = 256u << 20;
constexpr uint64_t kMaxDelayMs = 60000;
constexpr uint64_t kMaxDayS = 86400;
constexpr uint64_t kMaxFeedMessages = 1000000;
constexpr uint64_t kMaxMessageBytes = 1000000000;
constexpr uint64_t kMaxRetentionDays = 36500;
constexpr uint64_t kMaxRows = 9223372036854775807ull;
constexpr uint64_t kMaxBucketSize = 1000000;

const KeyList kStoreKeys = {"postgres", "schema", "connect_timeout_s", "statement_timeout_ms",
                            "lock_timeout_ms"};
const KeyList kFeedKeys = {"brokers",      "topic",          "collections",       "transactional_id",
                           "progress_topic", "max_messages", "max_message_bytes", "poll_ms",
                           "properties"};
const KeyList kBatchKeys = {"max_events", "max_delay_ms", "max_event_bytes", "stuck_after_s"};
const KeyList kRetentionKeys = {"tombstone_hours", "dead_letter_days", "max_dead_letters",
                                "interval_s"};
const KeyList kLimitsKeys = {"max_members", "fanout_warn", "max_document_bytes",
                              "max_bucket_pages"};
const KeyList kLogKeys = {"level", "format"};
const KeyList kProjectionKeys = {"from", "buckets", "collection", "include",
                                 "exclude", "fields", "partition_key", "by",
                                 "size", "order_by", "field", "select", "layout"};
const KeyList kEntityOnlyKeys = {"include", "exclude", "fields", "partition_key"};
const KeyList kBucketsOnlyKeys = {"by", "size", "order_by", "field", "select", "layout"};
// Tables (and the index refs_by_entity, in the same namespace) denormd keeps
// next to the collections, in the same schema: those
// connectors/postgres_store.cc creates (tests/connectors/reserved_tables_test.cc
// keeps the two in step), and the change feed's outbox and feed_state.
const KeyList kReservedTables = {"entities", "refs",  "refs_by_entity", "ref_counts", "positions",
                                 "locks",    "writers", "meta",         "dead_letters", "outbox",
                                 "feed_state", "apply_journal", "fanout_stats"};
// The longest suffix of the names made for a collection: its indexes
// ("_by_number") on the table `denormd apply` builds beside it
// ("<collection>__next_by_number"). PostgreSQL truncates names past 63
// bytes, so a collection name is at most 63 - 16 bytes.
constexpr size_t kLongestIndexSuffix = 16;

bool Contains(const KeyList& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

std::string JoinKeys(const KeyList& keys) {
  std::string out;
  for (const std::string& key : keys) out += (out.empty() ? "" : ", ") + key;
  return out;
}

// The largest count a derivation takes (an embed's or ids' `limit`).
constexpr uint64_t kMaxDerivationCount = 2147483647;

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

// A lowercase SQL identifier that needs no quoting: [a-z_][a-z0-9_]*, <= 63.
bool IsSqlIdentifier(const std::string& s) {
  if (s.empty() || s.size() > 63 || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// A character that may appear in a path's field name: anything but the
// path and template punctuation and ASCII whitespace.
bool IsFieldNameChar(char c) {
  return std::strchr(".[]{}", c) == nullptr && !std::isspace(static_cast<unsigned char>(c));
}

// Where the second YAML document of a text starts, or nullopt when it holds
// at most one. Counts with the event parser and stops after the second
// document: yaml-cpp 0.7's LoadAll never returns on some malformed texts (a
// line that starts with ",": the scanner yields empty documents without end),
// and a config must not hang the daemon that reads it.
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { last_start_ = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
  const YAML::Mark& last_start() const { return last_start_; }

 private:
  YAML::Mark last_start_ = YAML::Mark::null_mark();
};

std::optional<ConfigPlace> SecondDocumentPlace(const std::string& yaml_text) {
  std::istringstream in(yaml_text);
  YAML::Parser parser(in);
  DocumentCounter counter;
  if (!parser.HandleNextDocument(counter)) return std::nullopt;
  if (!parser.HandleNextDocument(counter)) return std::nullopt;
  const YAML::Mark& mark = counter.last_start();
  if (mark.is_null()) return ConfigPlace{};
  return ConfigPlace{mark.line + 1, mark.column + 1};
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
// The tree walk.

// A YAML node with its dotted location and the place to report it at (for a
// null map value, the place of its key: yaml-cpp marks nulls at the next token).
struct Item {
  YAML::Node node;
  std::string where;
  ConfigPlace place;
};

struct Entry {
  std::string key;
  ConfigPlace key_place;
  Item value;
};

// Where each projection's collection and partition key were written, for the
// checks across projections.
struct CollectionUse {
  std::string where;
  ConfigPlace place;
};

// "parent.key"; an empty key shows as "".
std::string Child(const std::string& where, const std::string& key) {
  const std::string shown = key.empty() ? "\"\"" : key;
  return where.empty() ? shown : where + "." + shown;
}

class ConfigParser {
 public:
  ConfigParser(const DerivationSyntaxes& kinds, std::vector<ConfigError>* errors)
      : kinds_(kinds), errors_(errors) {}

  // Fills *config from the document `root`; problems go to the error list.
  void Parse(const YAML::Node& root, Config* config);

 private:
  void Error(const ConfigPlace& place, const std::string& where, const std::string& message) {
    errors_->push_back(ConfigError{place, where, message});
  }
  void Error(const Item& item, const std::string& message) {
    Error(item.place, item.where, message);
  }

  // Generic shapes. Each reports what is wrong and returns false on failure.
  bool ExpectMap(const Item& item);
  std::vector<Entry> Entries(const Item& item);
  std::map<std::string, Item> ReadKeys(const Item& item, const KeyList& allowed,
                                       const std::string& context = "",
                                       const KeyList& known_elsewhere = {});
  bool Require(const Item& parent, const std::map<std::string, Item>& keys,
               const std::string& key);
  bool ReadString(const Item& item, std::string* out);
  bool ReadNonEmptyString(const Item& item, std::string* out);
  bool ReadUint(const Item& item, uint64_t min, uint64_t* out);
  // ReadUint, and at most `max` (`why` says what a larger value would do).
  bool ReadBoundedUint(const Item& item, uint64_t min, uint64_t max, const std::string& why,
                       uint64_t* out);
  bool ReadStringList(const Item& item, bool non_empty, std::vector<std::string>* out);
  bool ReadPath(const Item& item, Path* out);
  bool ReadOrderBy(const Item& item, OrderBy* out);
  bool ReadEntityType(const Item& item, std::string* out);
  bool ReadSqlName(const Item& item, const std::string& what, const std::string& name,
                   bool check_reserved);

  // Sections.
  void ReadSource(const Item& item, Config* config);
  void ReadTopics(const Item& item, KafkaSourceConfig* out);
  bool ReadTopic(const Item& item, TopicInput* out);
  bool ReadColumnList(const Item& item, std::vector<std::string>* out);
  void ReadStore(const Item& item, Config* config);
  void ReadBatch(const Item& item, Config* config);
  void ReadFeed(const Item& item, Config* config);
  bool ReadTopic(const Item& item, std::string* out);
  void CheckFeed(Config* config);
  void ReadRetention(const Item& item, Config* config);
  void ReadLimits(const Item& item, Config* config);
  void ReadLog(const Item& item, Config* config);
  void ReadEntities(const Item& item, Config* config);
  void ReadProjections(const Item& item, Config* config);
  void ReadProjection(const Entry& entry, ProjectionConfig* out, CollectionUse* use);
  void ReadEntityProjection(const std::map<std::string, Item>& keys, ProjectionConfig* out);
  void ReadBucketsProjection(const Item& item, const std::map<std::string, Item>& keys,
                             ProjectionConfig* out);
  bool ReadExpression(const Item& item, bool in_select, const std::string& root_type,
                      Expression* out);
  bool ReadDerivation(const Item& item, const DerivationSyntax& kind,
                      const std::string& root_type, Expression* out);
  // The names of the expression kinds ("value" and every derivation kind), and
  // every key any of them allows.
  KeyList KindNames() const;
  KeyList ExpressionKeys() const;
  bool ReadSelection(const Item& item, Selection* out);
  // Also marks the projections of shared collections.
  void CheckCollections(Config& config, const std::vector<CollectionUse>& uses);

  friend class YamlExpressionReader;

  const DerivationSyntaxes& kinds_;
  std::vector<ConfigError>* errors_;
  std::set<std::string> entities_;
  bool entities_known_ = false;  // false: skip entity checks (entities is broken)
  // Keys ReadKeys found unknown, by the `where` of their map: Require says a
  // missing key at its misspelling.
  std::map<std::string, std::vector<std::pair<std::string, ConfigPlace>>> unknown_keys_;
  Item feed_item_;                                             // the feed section
  std::vector<std::pair<ConfigPlace, std::string>> feed_places_;  // of feed.collections keys
};

bool ConfigParser::ExpectMap(const Item& item) {
  if (item.node.IsMap()) return true;
  Error(item, "expected a map, found " + Describe(item.node));
  return false;
}

// The map's entries in file order; reports non-string and duplicate keys and
// leaves them out.
std::vector<Entry> ConfigParser::Entries(const Item& item) {
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
std::map<std::string, Item> ConfigParser::ReadKeys(const Item& item, const KeyList& allowed,
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

bool ConfigParser::Require(const Item& parent, const std::map<std::string, Item>& keys,
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

bool ConfigParser::ReadString(const Item& item, std::string* out) {
  if (!item.node.IsScalar()) {
    Error(item, "expected a string, found " + Describe(item.node));
    return false;
  }
  *out = item.node.Scalar();
  return true;
}

bool ConfigParser::ReadNonEmptyString(const Item& item, std::string* out) {
  if (!ReadString(item, out)) return false;
  if (!out->empty()) return true;
  Error(item, "must not be empty");
  return false;
}

bool ConfigParser::ReadUint(const Item& item, uint64_t min, uint64_t* out) {
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

bool ConfigParser::ReadBoundedUint(const Item& item, uint64_t min, uint64_t max,
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

bool ConfigParser::ReadStringList(const Item& item, bool non_empty,
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

bool ConfigParser::ReadPath(const Item& item, Path* out) {
  std::string text;
  if (!ReadString(item, &text)) return false;
  const Status status = ParsePath(text, out);
  if (status.ok()) return true;
  Error(item, status.message());
  return false;
}

bool ConfigParser::ReadOrderBy(const Item& item, OrderBy* out) {
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

bool ConfigParser::ReadEntityType(const Item& item, std::string* out) {
  if (!ReadNonEmptyString(item, out)) return false;
  if (!entities_known_ || entities_.count(*out)) return true;
  Error(item, "unknown entity type " + Quote(*out) + " (not in entities)" +
                  Suggestion(*out, KeyList(entities_.begin(), entities_.end())));
  return false;
}

bool ConfigParser::ReadSqlName(const Item& item, const std::string& what, const std::string& name,
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

void ConfigParser::Parse(const YAML::Node& root, Config* config) {
  const Item top{root, "", PlaceOf(root)};
  if (root.IsNull()) {
    Error(top, "the configuration is empty");
    return;
  }
  if (!root.IsMap()) {
    Error(top, "the configuration must be a map with the keys " + JoinKeys(kTopKeys) +
                   ", found " + Describe(root));
    return;
  }
  const std::map<std::string, Item> keys = ReadKeys(top, kTopKeys);
  const auto section = [&keys](const std::string& key) { return keys.find(key); };
  // Entities first: the source names entity types (errors are sorted into
  // file order at the end).
  if (Require(top, keys, "entities")) ReadEntities(section("entities")->second, config);
  if (section("source") != keys.end()) ReadSource(section("source")->second, config);
  if (Require(top, keys, "store")) ReadStore(section("store")->second, config);
  if (section("batch") != keys.end()) ReadBatch(section("batch")->second, config);
  if (section("retention") != keys.end()) ReadRetention(section("retention")->second, config);
  if (section("limits") != keys.end()) ReadLimits(section("limits")->second, config);
  if (section("log") != keys.end()) ReadLog(section("log")->second, config);
  if (Require(top, keys, "projections")) {
    ReadProjections(section("projections")->second, config);
  }
  if (section("feed") != keys.end()) {
    ReadFeed(section("feed")->second, config);
    CheckFeed(config);
  }
}

void ConfigParser::ReadSource(const Item& item, Config* config) {
  if (!ExpectMap(item)) return;
  const auto keys = ReadKeys(item, kSourceKeys);
  const auto kafka_it = keys.find("kafka");
  if (kafka_it == keys.end()) return;
  const Item& kafka_item = kafka_it->second;
  if (!ExpectMap(kafka_item)) return;
  const auto kafka = ReadKeys(kafka_item, kKafkaKeys);
  KafkaSourceConfig out;
  if (Require(kafka_item, kafka, "brokers")) ReadNonEmptyString(kafka.at("brokers"), &out.brokers);
  if (Require(kafka_item, kafka, "topics")) ReadTopics(kafka.at("topics"), &out);
  if (Require(kafka_item, kafka, "group") &&
      ReadNonEmptyString(kafka.at("group"), &out.group) &&
      std::any_of(out.group.begin(), out.group.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    Error(kafka.at("group"), "the group must not contain control characters (a line break, a tab)");
  }
  if (kafka.count("dead_letter_topic") &&
      ReadString(kafka.at("dead_letter_topic"), &out.dead_letter_topic) &&
      !out.dead_letter_topic.empty() && !IsKafkaTopicName(out.dead_letter_topic)) {
    Error(kafka.at("dead_letter_topic"),
          "topic " + Quote(out.dead_letter_topic) +
              " is not a valid Kafka topic name (1 to 249 letters, digits, '.', '_', '-')");
  }
  if (kafka.count("properties") && ExpectMap(kafka.at("properties"))) {
    for (const Entry& entry : Entries(kafka.at("properties"))) {
      if (!entry.value.node.IsScalar()) {
        Error(entry.value, "a librdkafka property value must be a scalar, found " +
                               Describe(entry.value.node));
        continue;
      }
      out.properties.emplace_back(entry.key, entry.value.node.Scalar());
    }
  }
  config->kafka = std::move(out);
}

void ConfigParser::ReadTopics(const Item& item, KafkaSourceConfig* out) {
  if (!item.node.IsSequence()) {
    Error(item, "expected a list of topics, found " + Describe(item.node));
    return;
  }
  if (item.node.size() == 0) {
    Error(item, "must not be an empty list");
    return;
  }
  std::map<std::string, size_t> first_index;
  for (size_t i = 0; i < item.node.size(); ++i) {
    const YAML::Node element = item.node[i];
    const Item element_item{element, item.where + "[" + std::to_string(i) + "]",
                            element.IsNull() ? item.place : PlaceOf(element)};
    TopicInput input;
    if (!ReadTopic(element_item, &input)) continue;
    const auto [it, inserted] = first_index.emplace(input.topic, i);
    if (!inserted) {
      Error(element_item, "duplicate topic " + Quote(input.topic) + " (also topics[" +
                              std::to_string(it->second) + "])");
      continue;
    }
    out->topics.push_back(input.topic);
    out->inputs.push_back(std::move(input));
  }
}

// A topic entry: a name (the native format), or a map
// {topic, format, entity, id_columns, json_columns}.
bool ConfigParser::ReadTopic(const Item& item, TopicInput* out) {
  out->place = item.place;
  // A name (not a pattern) librdkafka could not subscribe to fails the start.
  const auto valid_name = [this](const Item& at, const std::string& topic) {
    if (topic.empty() || topic[0] == '^' || IsKafkaTopicName(topic)) return true;
    Error(at, "topic " + Quote(topic) +
                  " is not a valid Kafka topic name (1 to 249 letters, digits, '.', '_', '-'; "
                  "a pattern starts with '^')");
    return false;
  };
  if (item.node.IsScalar()) return ReadNonEmptyString(item, &out->topic) && valid_name(item, out->topic);
  if (!item.node.IsMap()) {
    Error(item, "expected a topic name or a map with \"topic\" and \"format\", found " +
                    Describe(item.node));
    return false;
  }
  const auto keys = ReadKeys(item, kTopicKeys);
  if (!Require(item, keys, "topic") || !ReadNonEmptyString(keys.at("topic"), &out->topic) ||
      !valid_name(keys.at("topic"), out->topic)) {
    return false;
  }
  bool ok = true;
  if (out->IsPattern()) {
    try {
      std::regex pattern(out->topic, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      Error(keys.at("topic"), "topic pattern " + Quote(out->topic) +
                                  " is not a valid regular expression: " + e.what());
      ok = false;
    }
  }
  std::string format = "native";
  if (keys.count("format") && ReadString(keys.at("format"), &format)) {
    if (format == "debezium") {
      out->format = InputFormat::kDebezium;
    } else if (format != "native") {
      Error(keys.at("format"), "unknown format " + Quote(format) + " (expected native or debezium)" +
                                   Suggestion(format, {"native", "debezium"}));
      return false;
    }
  }
  if (out->format != InputFormat::kDebezium) {
    for (const std::string& key : kDebeziumOnlyKeys) {
      if (keys.count(key)) {
        Error(keys.at(key), Quote(key) + " is only allowed with format: debezium");
        ok = false;
      }
    }
    return ok;
  }
  if (keys.count("entity")) {
    ok = ReadEntityType(keys.at("entity"), &out->entity) && ok;
  } else if (!out->IsPattern() && entities_known_) {
    const size_t dot = out->topic.rfind('.');
    const std::string table = dot == std::string::npos ? out->topic : out->topic.substr(dot + 1);
    if (!entities_.count(table)) {
      Error(keys.at("topic"), "topic " + Quote(out->topic) + " maps to the entity type " +
                                  Quote(table) +
                                  " (its table name), which is not in entities; add it there "
                                  "or name the type with \"entity\"");
      ok = false;
    }
  }
  if (keys.count("id_columns")) ok = ReadColumnList(keys.at("id_columns"), &out->id_columns) && ok;
  if (keys.count("json_columns")) {
    ok = ReadColumnList(keys.at("json_columns"), &out->json_columns) && ok;
  }
  return ok;
}

// A non-empty list of distinct column names.
bool ConfigParser::ReadColumnList(const Item& item, std::vector<std::string>* out) {
  if (!ReadStringList(item, true, out)) return false;
  std::set<std::string> seen;
  for (size_t i = 0; i < out->size(); ++i) {
    if (!seen.insert((*out)[i]).second) {
      Error(item, "column " + Quote((*out)[i]) + " is listed twice");
      return false;
    }
  }
  return true;
}

void ConfigParser::ReadStore(const Item& item, Config* config) {
  if (!ExpectMap(item)) return;
  const auto keys = ReadKeys(item, kStoreKeys);
  if (keys.count("postgres")) ReadString(keys.at("postgres"), &config->store.postgres);
  if (Require(item, keys, "schema") && ReadString(keys.at("schema"), &config->store.schema)) {
    ReadSqlName(keys.at("schema"), "schema", config->store.schema, false);
  }
  if (keys.count("connect_timeout_s")) {
    ReadBoundedUint(keys.at("connect_timeout_s"), 1, kMaxConnectTimeoutS, "an hour",
                    &config->store.connect_timeout_s);
  }
  if (keys.count("statement_timeout_ms")) {
    ReadBoundedUint(keys.at("statement_timeout_ms"), 0, kMaxPostgresMs,
                    "PostgreSQL's largest timeout", &config->store.statement_timeout_ms);
  }
  if (keys.count("lock_timeout_ms")) {
    ReadBoundedUint(keys.at("lock_timeout_ms"), 0, kMaxPostgresMs, "PostgreSQL's largest timeout",
                    &config->store.lock_timeout_ms);
  }
}

void ConfigParser::ReadBatch(const Item& item, Config* config) {
  if (!ExpectMap(item)) return;
  const auto keys = ReadKeys(item, kBatchKeys);
  if (keys.count("max_events")) {
    ReadBoundedUint(keys.at("max_events"), 1, kMaxBatchEvents,
                    "a batch is one transaction held in memory", &config->batch.max_events);
  }
  if (keys.count("max_event_bytes")) {
    ReadBoundedUint(keys.at("max_event_bytes"), 1024, kMaxEventBytes,
                    "256 MiB: PostgreSQL's jsonb holds less", &config->batch.max_event_bytes);
  }
  if (keys.count("max_delay_ms")) {
    ReadBoundedUint(keys.at("max_delay_ms"), 0, kMaxDelayMs, "a minute",
                    &config->batch.max_delay_ms);
  }
  if (keys.count("stuck_after_s")) {
    ReadBoundedUint(keys.at("stuck_after_s"), 1, kMaxDayS, "a day", &config->batch.stuck_after_s);
  }
}

bool ConfigParser::ReadTopic(const Item& item, std::string* out) {
  if (!ReadNonEmptyString(item, out)) return false;
  if (IsKafkaTopicName(*out)) return true;
  Error(item, "topic " + Quote(*out) +
                  " is not a valid Kafka topic name (1 to 249 letters, digits, '.', '_', '-')");
  return false;
}

void ConfigParser::ReadFeed(const Item& item, Config* config) {
  if (!ExpectMap(item)) return;
  const auto keys = ReadKeys(item, kFeedKeys);
  FeedConfig feed;
  if (keys.count("brokers")) ReadNonEmptyString(keys.at("brokers"), &feed.brokers);
  if (keys.count("topic")) ReadTopic(keys.at("topic"), &feed.topic);
  if (keys.count("collections") && ExpectMap(keys.at("collections"))) {
    for (const Entry& entry : Entries(keys.at("collections"))) {
      std::string topic;
      if (!ReadTopic(entry.value, &topic)) continue;
      feed.collections.emplace_back(entry.key, topic);
      feed_places_.emplace_back(entry.key_place, entry.value.where);
    }
  }
  if (!keys.count("topic") && !keys.count("collections")) {
    Error(item, "give \"topic\" (every collection), \"collections\" (collection: topic) or both");
  }
  // The relay's Kafka transactional.id and the key of its progress records;
  // the default progress topic is derived from it.
  if (keys.count("transactional_id") &&
      ReadNonEmptyString(keys.at("transactional_id"), &feed.transactional_id)) {
    if (!IsKafkaTopicName(feed.transactional_id)) {
      Error(keys.at("transactional_id"),
            "transactional_id " + Quote(feed.transactional_id) +
                " must be 1 to 249 letters, digits, '.', '_', '-' (it names the relay in Kafka "
                "and its progress topic)");
    } else if (!keys.count("progress_topic") &&
               !IsKafkaTopicName(feed.transactional_id + ".progress")) {
      Error(keys.at("transactional_id"),
            "transactional_id is too long to derive the progress topic \"<transactional_id>"
            ".progress\" (249 characters at most): shorten it, or set progress_topic");
    }
  }
  if (keys.count("progress_topic")) ReadTopic(keys.at("progress_topic"), &feed.progress_topic);
  if (keys.count("max_messages")) {
    ReadBoundedUint(keys.at("max_messages"), 1, kMaxFeedMessages,
                    "one Kafka transaction held in memory", &feed.max_messages);
  }
  if (keys.count("max_message_bytes")) {
    ReadBoundedUint(keys.at("max_message_bytes"), 1024, kMaxMessageBytes,
                    "librdkafka's largest message.max.bytes", &feed.max_message_bytes);
  }
  if (keys.count("poll_ms")) {
    ReadBoundedUint(keys.at("poll_ms"), 1, kMaxDelayMs, "a minute", &feed.poll_ms);
  }
  if (keys.count("properties") && ExpectMap(keys.at("properties"))) {
    for (const Entry& entry : Entries(keys.at("properties"))) {
      if (!entry.value.node.IsScalar()) {
        Error(entry.value, "a librdkafka property value must be a scalar, found " +
                               Describe(entry.value.node));
        continue;
      }
      feed.properties.emplace_back(entry.key, entry.value.node.Scalar());
    }
  }
  feed_item_ = item;
  config->feed = std::move(feed);
}

// What the feed section can only be checked against, and its defaults,
// once the whole file is read.
void ConfigParser::CheckFeed(Config* config) {
  FeedConfig& feed = *config->feed;
  const std::vector<std::string> known = config->CollectionNames();
  for (size_t i = 0; i < feed.collections.size(); ++i) {
    const std::string& collection = feed.collections[i].first;
    const auto& place = feed_places_[i];
    if (!std::binary_search(known.begin(), known.end(), collection) && !config->projections.empty()) {
      Error(place.first, place.second,
            "unknown collection " + Quote(collection) + " (collections: " + JoinKeys(known) + ")" +
                Suggestion(collection, known));
    }
  }
  if (feed.brokers.empty()) {
    if (config->kafka) {
      feed.brokers = config->kafka->brokers;
    } else {
      Error(feed_item_, "missing required key \"brokers\" (there is no source.kafka to take "
                        "them from)");
    }
  }
  if (feed.transactional_id.empty() && !config->store.schema.empty()) {
    feed.transactional_id = "denormd-feed-" + config->store.schema;
  }
  if (feed.progress_topic.empty()) feed.progress_topic = feed.transactional_id + ".progress";
  for (const auto& entry : feed.collections) {
    if (entry.second == feed.progress_topic) {
      Error(feed_item_, "the progress topic " + Quote(feed.progress_topic) +
                        " cannot also carry documents");
    }
  }
  if (!feed.topic.empty() && feed.topic == feed.progress_topic) {
    Error(feed_item_, "the progress topic " + Quote(feed.progress_topic) +
                      " cannot also carry documents");
  }
}

void ConfigParser::ReadRetention(const Item& item, Config* config) {
  if (!ExpectMap(item)) return;
  const auto keys = ReadKeys(item, kRetentionKeys);
  RetentionConfig& out = config->retention;
  if (keys.count("tombstone_hours")) {
    ReadBoundedUint(keys.at("tombstone_hours"), 0, kMaxRetentionDays * 24, "100 years",
                    &out.tombstone_hours);
  }
  if (keys.count("dead_letter_days")) {
    ReadBoundedUint(keys.at("dead_letter_days"), 0, kMaxRetentionDays, "100 years",
                    &out.dead_letter_days);
  }
  if (keys.count("max_dead_letters")) {
    ReadBoundedUint(keys.at("max_dead_letters"), 0, kMaxRows, "PostgreSQL's bigint",
                    &out.max_dead_letters);
  }
  if (keys.count("interval_s")) {
    ReadBoundedUint(keys.at("interval_s"), 0, kMaxDayS * 365, "a year", &out.interval_s);
  }
}

void ConfigParser::ReadLimits(const Item& item, Config* config) {
  if (!ExpectMap(item)) return;
  const auto keys = ReadKeys(item, kLimitsKeys);
  LimitsConfig& out = config->limits;
  if (keys.count("max_members")) {
    ReadBoundedUint(keys.at("max_members"), 1, kMaxRows, "PostgreSQL's bigint", &out.max_members);
  }
  if (keys.count("fanout_warn")) {
    ReadBoundedUint(keys.at("fanout_warn"), 1, kMaxRows, "PostgreSQL's bigint", &out.fanout_warn);
  }
  if (keys.count("max_document_bytes")) {
    ReadBoundedUint(keys.at("max_document_bytes"), 1, kMaxMessageBytes, "1 GB",
                    &out.max_document_bytes);
  }
  if (keys.count("max_bucket_pages")) {
    ReadBoundedUint(keys.at("max_bucket_pages"), 1, kMaxRows, "PostgreSQL's bigint",
                    &out.max_bucket_pages);
  }
}

void ConfigParser::ReadLog(const Item& item, Config* config) {
  if (!ExpectMap(item)) return;
  const auto keys = ReadKeys(item, kLogKeys);
  std::string text;
  if (keys.count("level") && ReadString(keys.at("level"), &text) &&
      !ParseLogLevel(text, &config->log.level)) {
    Error(keys.at("level"), "level must be debug, info, warn or error, found " + Quote(text));
  }
  if (keys.count("format") && ReadString(keys.at("format"), &text) &&
      !ParseLogFormat(text, &config->log.format)) {
    Error(keys.at("format"), "format must be text or json, found " + Quote(text));
  }
}

void ConfigParser::ReadEntities(const Item& item, Config* config) {
  if (!item.node.IsSequence()) {
    Error(item, "expected a list of entity types, found " + Describe(item.node));
    return;
  }
  entities_known_ = true;
  std::vector<std::string> names;
  ReadStringList(item, true, &names);
  std::map<std::string, size_t> first_index;
  for (size_t i = 0; i < item.node.size(); ++i) {
    const YAML::Node element = item.node[i];
    if (!element.IsScalar() || element.Scalar().empty()) continue;
    const std::string& name = element.Scalar();
    const auto [it, inserted] = first_index.emplace(name, i);
    if (inserted) {
      config->entities.push_back(name);
      entities_.insert(name);
    } else {
      Error(PlaceOf(element), item.where + "[" + std::to_string(i) + "]",
            "duplicate entity type " + Quote(name) + " (also entities[" +
                std::to_string(it->second) + "])");
    }
  }
}

void ConfigParser::ReadProjections(const Item& item, Config* config) {
  if (!ExpectMap(item)) return;
  const std::vector<Entry> entries = Entries(item);
  std::vector<CollectionUse> uses;
  for (const Entry& entry : entries) {
    ProjectionConfig projection;
    CollectionUse use;
    ReadProjection(entry, &projection, &use);
    config->projections.push_back(std::move(projection));
    uses.push_back(std::move(use));
  }
  CheckCollections(*config, uses);
}

void ConfigParser::ReadProjection(const Entry& entry, ProjectionConfig* out, CollectionUse* use) {
  const Item& item = entry.value;
  out->name = entry.key;
  out->place = entry.key_place;
  out->collection = entry.key;
  *use = CollectionUse{item.where, entry.key_place};
  if (entry.key.empty()) Error(entry.key_place, item.where, "a projection name must not be empty");
  if (!ExpectMap(item)) return;
  const auto keys = ReadKeys(item, kProjectionKeys);
  const bool has_from = keys.count("from") > 0;
  const bool has_buckets = keys.count("buckets") > 0;
  if (has_from && has_buckets) {
    Error(item, "give either \"from\" or \"buckets\", not both");
  } else if (!has_from && !has_buckets) {
    Error(item.place, item.where, "missing required key \"from\" or \"buckets\"");
  }
  const auto collection = keys.find("collection");
  if (collection != keys.end()) {
    use->where = collection->second.where;
    use->place = collection->second.place;
    if (ReadString(collection->second, &out->collection)) {
      ReadSqlName(collection->second, "collection", out->collection, true);
    }
  } else if (!entry.key.empty()) {
    ReadSqlName(Item{item.node, item.where, entry.key_place},
                "collection (the projection's name)", out->collection, true);
  }
  if (has_buckets) {
    ReadBucketsProjection(item, keys, out);
  } else if (has_from) {
    ReadEntityProjection(keys, out);
  }
}

void ConfigParser::ReadEntityProjection(const std::map<std::string, Item>& keys,
                                        ProjectionConfig* out) {
  out->kind = ProjectionConfig::Kind::kEntity;
  ReadEntityType(keys.at("from"), &out->from);
  for (const std::string& key : kBucketsOnlyKeys) {
    if (keys.count(key)) {
      const Item& item = keys.at(key);
      const bool relation_key = key == "select" || key == "order_by";
      Error(item, Quote(key) + " is only allowed in a buckets projection" +
                      (relation_key ? " or inside an embed or lookup" : ""));
    }
  }
  const auto include = keys.find("include");
  const auto exclude = keys.find("exclude");
  if (include != keys.end()) {
    out->has_include = true;
    ReadStringList(include->second, false, &out->include);
  }
  if (exclude != keys.end()) {
    if (include != keys.end()) {
      Error(exclude->second, "give either \"include\" or \"exclude\", not both");
    } else {
      ReadStringList(exclude->second, false, &out->exclude);
    }
  }
  if (keys.count("partition_key")) {
    ReadNonEmptyString(keys.at("partition_key"), &out->partition_key);
  }
  const auto fields = keys.find("fields");
  if (fields == keys.end() || !ExpectMap(fields->second)) return;
  for (const Entry& entry : Entries(fields->second)) {
    if (entry.key.empty()) {
      Error(entry.key_place, entry.value.where, "a field name must not be empty");
      continue;
    }
    if (entry.key == "id") {
      Error(entry.key_place, entry.value.where,
            "\"id\" is the document's id and cannot be derived; choose another name");
      continue;
    }
    Expression expression;
    if (ReadExpression(entry.value, false, out->from, &expression)) {
      out->fields.emplace_back(entry.key, std::move(expression));
    }
  }
}

void ConfigParser::ReadBucketsProjection(const Item& item, const std::map<std::string, Item>& keys,
                                         ProjectionConfig* out) {
  out->kind = ProjectionConfig::Kind::kBuckets;
  ReadEntityType(keys.at("buckets"), &out->buckets);
  for (const std::string& key : kEntityOnlyKeys) {
    if (keys.count(key)) {
      Error(keys.at(key), Quote(key) + " is not allowed in a buckets projection (allowed: " +
                              JoinKeys(kBucketsOnlyKeys) + ", collection)");
    }
  }
  if (Require(item, keys, "by")) ReadPath(keys.at("by"), &out->by);
  if (keys.count("size")) {
    ReadBoundedUint(keys.at("size"), 1, kMaxBucketSize, "one document holds them all",
                    &out->size);
  }
  if (keys.count("order_by")) ReadOrderBy(keys.at("order_by"), &out->order_by);
  if (keys.count("select")) ReadSelection(keys.at("select"), &out->select);
  if (keys.count("field")) {
    const Item& field = keys.at("field");
    if (ReadNonEmptyString(field, &out->field) &&
        (out->field == "id" || out->field == "seq" || out->field == out->by.text)) {
      Error(field, "field " + Quote(out->field) + " would overwrite the document's " +
                       Quote(out->field) + "; choose another name");
    }
  }
  if (out->by.text == "seq") {
    Error(keys.at("by"), "by \"seq\" would be overwritten by the bucket's seq; group by another field");
  }
  if (keys.count("layout")) {
    const Item& layout = keys.at("layout");
    std::string text;
    if (ReadString(layout, &text)) {
      if (text == "stable") {
        out->layout = ProjectionConfig::BucketLayout::kStable;
      } else if (text == "packed") {
        out->layout = ProjectionConfig::BucketLayout::kPacked;
      } else {
        Error(layout, "layout must be stable or packed, found " + Describe(layout.node));
      }
    }
  }
}

bool ConfigParser::ReadExpression(const Item& item, bool in_select, const std::string& root_type,
                                  Expression* out) {
  out->place = item.place;
  if (item.node.IsScalar()) {
    const std::string& text = item.node.Scalar();
    const bool is_template = text.find('{') != std::string::npos;
    out->kind = is_template ? Expression::Kind::kTemplate : Expression::Kind::kPath;
    size_t error_at = 0;
    const Status status = is_template ? ParseTemplate(text, &out->template_, &error_at)
                                      : ParsePath(text, &out->path);
    if (status.ok()) return true;
    ConfigPlace place = item.place;
    // A template's error points at its brace: past the opening quote of a
    // quoted scalar (tag "!"), on the scalar's line (a one-line scalar).
    if (is_template && place.line > 0 && text.find('\n') == std::string::npos) {
      place.column += static_cast<int>(error_at) + (item.node.Tag() == "!" ? 1 : 0);
    }
    Error(place, item.where, status.message());
    return false;
  }
  if (!item.node.IsMap()) {
    Error(item, "expected a path, a \"{template}\" string or a map such as {value: ...}, found " +
                    Describe(item.node));
    return false;
  }
  const KeyList kind_names = KindNames();
  KeyList kinds;
  for (const auto& pair : item.node) {
    if (pair.first.IsScalar() && Contains(kind_names, pair.first.Scalar())) {
      kinds.push_back(pair.first.Scalar());
    }
  }
  if (kinds.size() != 1) {
    // {firstName} unquoted is YAML for the map {firstName: null}.
    const bool looks_like_template =
        kinds.empty() && item.node.size() == 1 && item.node.begin()->second.IsNull();
    if (!looks_like_template) ReadKeys(item, ExpressionKeys());
    if (kinds.empty()) {
      Error(item, "an expression map needs one of " + JoinKeys(kind_names) +
                      (looks_like_template ? " (a template must be quoted: \"{...}\")" : ""));
    } else {
      Error(item, "give exactly one of " + JoinKeys(kind_names) + ", found " + JoinKeys(kinds));
    }
    return false;
  }
  const std::string& kind = kinds[0];
  if (in_select && kind != "value") {
    Error(item, "a select map holds only paths, templates and {value: ...}; " + Quote(kind) +
                    " is not allowed here");
    return false;
  }
  for (const DerivationSyntax* syntax : kinds_) {
    if (syntax->name() == kind) return ReadDerivation(item, *syntax, root_type, out);
  }
  const size_t errors_before = errors_->size();
  const auto keys = ReadKeys(item, {"value"}, "a value", ExpressionKeys());
  out->kind = Expression::Kind::kValue;
  const Status json = AppendJson(keys.at("value").node, &out->value_json);
  if (!json.ok()) Error(keys.at("value"), json.message());
  return errors_->size() == errors_before;
}

KeyList ConfigParser::KindNames() const {
  KeyList names = {"value"};
  for (const DerivationSyntax* syntax : kinds_) names.push_back(syntax->name());
  return names;
}

KeyList ConfigParser::ExpressionKeys() const {
  KeyList keys = {"value"};
  for (const DerivationSyntax* syntax : kinds_) {
    for (const std::string& key : syntax->keys()) {
      if (!Contains(keys, key)) keys.push_back(key);
    }
  }
  return keys;
}

// The ExpressionReader a derivation kind parses its map with: typed reads of
// the keys, each problem reported with its place.
class YamlExpressionReader : public ExpressionReader {
 public:
  YamlExpressionReader(ConfigParser* parser, const Item& item, std::map<std::string, Item> keys,
                       const std::string& root_type)
      : parser_(parser), item_(item), keys_(std::move(keys)), root_type_(root_type) {}

  const std::string& root_type() const override { return root_type_; }
  bool Has(const std::string& key) const override { return keys_.count(key) > 0; }
  bool ReadEntityType(const std::string& key, std::string* out) override {
    return Require(key) && parser_->ReadEntityType(keys_.at(key), out);
  }
  bool ReadPath(const std::string& key, Path* out) override {
    return Require(key) && parser_->ReadPath(keys_.at(key), out);
  }
  bool ReadOrderBy(const std::string& key, OrderBy* out) override {
    return Require(key) && parser_->ReadOrderBy(keys_.at(key), out);
  }
  bool ReadUint(const std::string& key, uint64_t min, uint64_t* out) override {
    // A derivation's counts (`limit`) reach PostgreSQL as integers.
    return Require(key) &&
           parser_->ReadBoundedUint(keys_.at(key), min, kMaxDerivationCount,
                                    "a count PostgreSQL reads as a 32-bit integer", out);
  }
  bool ReadSelection(const std::string& key, Selection* out) override {
    return Require(key) && parser_->ReadSelection(keys_.at(key), out);
  }
  bool ReadChoice(const std::string& key, const std::vector<std::string>& choices,
                  std::string* out) override {
    if (!Require(key)) return false;
    const Item& item = keys_.at(key);
    const std::string text = item.node.IsNull() ? "null"
                             : item.node.IsScalar() ? item.node.Scalar()
                                                    : "";
    if (Contains(choices, text)) {
      *out = text;
      return true;
    }
    std::string listed;
    for (size_t i = 0; i < choices.size(); ++i) {
      listed += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
    }
    parser_->Error(item, key + " must be " + listed + ", found " + Describe(item.node));
    return false;
  }
  void Error(const std::string& key, const std::string& message) override {
    auto it = keys_.find(key);
    parser_->Error(it == keys_.end() ? item_ : it->second, message);
  }

 private:
  bool Require(const std::string& key) { return parser_->Require(item_, keys_, key); }

  ConfigParser* parser_;
  const Item& item_;
  std::map<std::string, Item> keys_;
  const std::string& root_type_;
};

// A derivation map: its keys checked against the kind's, then parsed by the kind.
bool ConfigParser::ReadDerivation(const Item& item, const DerivationSyntax& kind,
                                  const std::string& root_type, Expression* out) {
  const size_t errors_before = errors_->size();
  const char first = kind.name().empty() ? 'x' : kind.name()[0];
  const std::string article = std::strchr("aeiou", first) != nullptr ? "an " : "a ";
  YamlExpressionReader reader(this, item,
                              ReadKeys(item, kind.keys(), article + kind.name(), ExpressionKeys()),
                              root_type);
  out->kind = Expression::Kind::kDerived;
  out->derivation = kind.name();
  out->spec = kind.Parse(reader);
  return out->spec != nullptr && errors_->size() == errors_before;
}

bool ConfigParser::ReadSelection(const Item& item, Selection* out) {
  if (item.node.IsSequence()) {
    out->kind = Selection::Kind::kList;
    return ReadStringList(item, false, &out->fields);
  }
  if (!item.node.IsMap()) {
    Error(item, "select must be a list of field names or a map of name: expression, found " +
                    Describe(item.node));
    return false;
  }
  out->kind = Selection::Kind::kMap;
  bool ok = true;
  for (const Entry& entry : Entries(item)) {
    Expression expression;
    if (entry.key.empty()) {
      Error(entry.key_place, entry.value.where, "a field name must not be empty");
      ok = false;
    } else if (ReadExpression(entry.value, true, "", &expression)) {
      out->map.emplace_back(entry.key, std::move(expression));
    } else {
      ok = false;
    }
  }
  return ok;
}

// Projections sharing a collection must all have the same partition key, and
// a buckets projection shares its collection with no other.
void ConfigParser::CheckCollections(Config& config, const std::vector<CollectionUse>& uses) {
  std::map<std::string, std::vector<size_t>> by_collection;
  for (size_t i = 0; i < config.projections.size(); ++i) {
    if (!config.projections[i].name.empty()) {
      by_collection[config.projections[i].collection].push_back(i);
    }
  }
  for (const auto& [collection, members] : by_collection) {
    if (members.size() < 2) continue;
    for (size_t i : members) config.projections[i].shared_collection = true;
    const auto others = [&](size_t self) {
      std::string names;
      for (size_t i : members) {
        if (i != self) names += (names.empty() ? "" : ", ") + Quote(config.projections[i].name);
      }
      return names;
    };
    const bool has_buckets = std::any_of(members.begin(), members.end(), [&](size_t i) {
      return config.projections[i].kind == ProjectionConfig::Kind::kBuckets;
    });
    std::set<std::string> keys;  // the partition keys declared, "" left out
    for (size_t i : members) {
      const std::string& key = config.projections[i].partition_key;
      if (!key.empty()) keys.insert(key);
    }
    for (size_t i : members) {
      const ProjectionConfig& p = config.projections[i];
      const std::string shared = "collection " + Quote(collection) + " is also written by " +
                                 others(i);
      if (has_buckets) {
        Error(uses[i].place, uses[i].where,
              shared + "; a buckets projection needs a collection of its own");
      } else if (p.partition_key.empty()) {
        Error(uses[i].place, uses[i].where,
              shared + " but this projection has no partition_key: two projections writing "
                       "different types into one collection without a partition key");
      } else if (keys.size() > 1) {
        Error(uses[i].place, uses[i].where,
              shared + " with a different partition_key (this one: " + Quote(p.partition_key) +
                  "); projections sharing a collection must declare the same partition_key");
      }
    }
  }
}

Status Fail(const std::string& text, const std::string& kind, const std::string& reason) {
  return Status::InvalidInput("bad " + kind + " " + Quote(text) + ": " + reason);
}

}  // namespace

// ----------------------------------------------------------------------------
// Public API.

Status ParsePath(const std::string& text, Path* out) {
  Path path;
  path.text = text;
  if (text.empty()) return Fail(text, "path", "the path is empty");
  size_t i = 0;
  while (true) {
    const size_t start = i;
    while (i < text.size() && IsFieldNameChar(text[i])) ++i;
    const std::string at = " at character " + std::to_string(i + 1);
    if (i == start) {
      if (i < text.size() && text[i] == '[') {
        return Fail(text, "path", "'[' must follow a field name" + at);
      }
      if (i == text.size() || text[i] == '.') {
        return Fail(text, "path", "empty field name" + at);
      }
      return Fail(text, "path", "unexpected " + Quote(std::string(1, text[i])) + at);
    }
    PathStep field;
    field.field = text.substr(start, i - start);
    path.steps.push_back(std::move(field));
    while (i < text.size() && text[i] == '[') {
      const size_t close = text.find(']', i);
      if (close == std::string::npos) {
        return Fail(text, "path", "'[' at character " + std::to_string(i + 1) + " is not closed");
      }
      const std::string inside = text.substr(i + 1, close - i - 1);
      PathStep step;
      if (inside.empty()) {
        step.kind = PathStep::Kind::kFirstWith;
        if (close + 1 >= text.size() || text[close + 1] != '.') {
          return Fail(text, "path", "'[]' must be followed by '.field' (the field to look for)");
        }
      } else {
        const bool digits = std::all_of(inside.begin(), inside.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c));
        });
        errno = 0;
        step.kind = PathStep::Kind::kIndex;
        step.index = digits ? std::strtoull(inside.c_str(), nullptr, 10) : 0;
        if (!digits || errno == ERANGE) {
          return Fail(text, "path", "index " + Quote(inside) + " at character " +
                                        std::to_string(i + 1) + " is not a non-negative integer");
        }
      }
      path.steps.push_back(std::move(step));
      i = close + 1;
    }
    if (i == text.size()) break;
    if (text[i] != '.') {
      return Fail(text, "path",
                  "unexpected " + Quote(std::string(1, text[i])) + " at character " +
                      std::to_string(i + 1));
    }
    ++i;
  }
  *out = std::move(path);
  return Status::Ok();
}

Status ParseTemplate(const std::string& text, Template* out, size_t* error_at) {
  Template result;
  result.text = text;
  std::string literal;
  const auto flush = [&result, &literal]() {
    if (literal.empty()) return;
    Template::Part part;
    part.literal = std::move(literal);
    result.parts.push_back(std::move(part));
    literal.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool doubled = i + 1 < text.size() && text[i + 1] == c;
    if ((c == '{' || c == '}') && doubled) {
      literal.push_back(c);
      ++i;
    } else if (c == '}') {
      if (error_at != nullptr) *error_at = i;
      return Fail(text, "template",
                  "stray '}' at character " + std::to_string(i + 1) + " (write '}}' for a brace)");
    } else if (c == '{') {
      if (error_at != nullptr) *error_at = i;
      const size_t close = text.find('}', i);
      if (close == std::string::npos) {
        return Fail(text, "template",
                    "'{' at character " + std::to_string(i + 1) + " is not closed");
      }
      Template::Part part;
      part.is_path = true;
      const Status path = ParsePath(text.substr(i + 1, close - i - 1), &part.path);
      if (!path.ok()) return Fail(text, "template", path.message());
      flush();
      result.parts.push_back(std::move(part));
      i = close;
    } else {
      literal.push_back(c);
    }
  }
  flush();
  *out = std::move(result);
  return Status::Ok();
}

std::string NormalizedSelection(const Selection& selection) {
  std::string out;
  switch (selection.kind) {
    case Selection::Kind::kWhole:
      return "";
    case Selection::Kind::kList:
      for (const std::string& field : selection.fields) out += (out.empty() ? "" : ", ") + field;
      return "select [" + out + "]";
    case Selection::Kind::kMap:
      for (const auto& entry : selection.map) {
        out += (out.empty() ? "" : ", ") + entry.first + ": " + NormalizedExpression(entry.second);
      }
      return "select {" + out + "}";
  }
  return out;
}

std::string NormalizedOrderBy(const OrderBy& order_by) {
  if (!order_by.present) return "";
  return std::string("order_by ") + (order_by.descending ? "-" : "") + order_by.path.text;
}

std::string NormalizedExpression(const Expression& expression) {
  switch (expression.kind) {
    case Expression::Kind::kPath:
      return expression.path.text;
    case Expression::Kind::kTemplate: {
      std::string quoted;
      AppendJsonString(expression.template_.text, &quoted);
      return quoted;
    }
    case Expression::Kind::kValue:
      return "{value: " + expression.value_json + "}";
    case Expression::Kind::kDerived:
      return expression.spec ? expression.spec->Normalized() : expression.derivation;
  }
  return "";
}

namespace {

std::string JoinList(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return "[" + out + "]";
}

// A projection in one canonical line: equal for equal meaning, whatever its
// place in the file or the spelling of its derivations.
std::string NormalizedProjection(const ProjectionConfig& p) {
  std::string out = "collection " + p.collection;
  if (p.kind == ProjectionConfig::Kind::kEntity) {
    out += " from " + p.from;
    if (p.has_include) out += " include " + JoinList(p.include);
    out += " exclude " + JoinList(p.exclude) + " partition_key " + p.partition_key + " fields {";
    for (const auto& field : p.fields) out += field.first + ": " + NormalizedExpression(field.second) + "; ";
    return out + "}";
  }
  const bool stable = p.layout == ProjectionConfig::BucketLayout::kStable;
  return out + " buckets " + p.buckets + " by " + p.by.text + " size " + std::to_string(p.size) +
         " " + NormalizedOrderBy(p.order_by) + " field " + p.field + " " +
         NormalizedSelection(p.select) + " layout " + (stable ? "stable" : "packed");
}

std::string NormalizedProperties(const std::vector<std::pair<std::string, std::string>>& properties) {
  std::string out;
  for (const auto& property : properties) out += property.first + "=" + property.second + "\n";
  return out;
}

// How one topic's records are read: its format and the Debezium settings.
std::string NormalizedInput(const TopicInput& input) {
  return std::string(input.format == InputFormat::kDebezium ? "debezium" : "native") +
         " entity " + input.entity + " id_columns " + JoinList(input.id_columns) +
         " json_columns " + JoinList(input.json_columns);
}

}  // namespace

std::vector<std::string> ConfigChanges(const Config& before, const Config& after) {
  std::vector<std::string> changed;
  const auto compare = [&changed](const char* name, const auto& a, const auto& b) {
    if (!(a == b)) changed.push_back(name);
  };
  if (before.kafka.has_value() != after.kafka.has_value()) {
    changed.push_back("source.kafka");
  } else if (before.kafka) {
    const KafkaSourceConfig& a = *before.kafka;
    const KafkaSourceConfig& b = *after.kafka;
    compare("source.kafka.brokers", a.brokers, b.brokers);
    compare("source.kafka.topics", a.topics, b.topics);
    compare("source.kafka.group", a.group, b.group);
    compare("source.kafka.dead_letter_topic", a.dead_letter_topic, b.dead_letter_topic);
    compare("source.kafka.properties", NormalizedProperties(a.properties),
            NormalizedProperties(b.properties));
    // Each topic's input settings (format, entity, id_columns,
    // json_columns), by topic, for the topics both name.
    for (const TopicInput& input : b.inputs) {
      for (const TopicInput& old : a.inputs) {
        if (old.topic == input.topic && NormalizedInput(old) != NormalizedInput(input)) {
          changed.push_back("source.kafka.topics." + input.topic);
        }
      }
    }
  }
  compare("store.postgres", before.store.postgres, after.store.postgres);
  compare("store.schema", before.store.schema, after.store.schema);
  compare("store.connect_timeout_s", before.store.connect_timeout_s, after.store.connect_timeout_s);
  compare("store.statement_timeout_ms", before.store.statement_timeout_ms,
          after.store.statement_timeout_ms);
  compare("store.lock_timeout_ms", before.store.lock_timeout_ms, after.store.lock_timeout_ms);
  compare("batch.max_events", before.batch.max_events, after.batch.max_events);
  compare("batch.max_delay_ms", before.batch.max_delay_ms, after.batch.max_delay_ms);
  compare("batch.max_event_bytes", before.batch.max_event_bytes, after.batch.max_event_bytes);
  compare("batch.stuck_after_s", before.batch.stuck_after_s, after.batch.stuck_after_s);
  compare("retention.tombstone_hours", before.retention.tombstone_hours,
          after.retention.tombstone_hours);
  compare("retention.dead_letter_days", before.retention.dead_letter_days,
          after.retention.dead_letter_days);
  compare("retention.max_dead_letters", before.retention.max_dead_letters,
          after.retention.max_dead_letters);
  compare("retention.interval_s", before.retention.interval_s, after.retention.interval_s);
  compare("limits.max_members", before.limits.max_members, after.limits.max_members);
  compare("limits.fanout_warn", before.limits.fanout_warn, after.limits.fanout_warn);
  compare("limits.max_document_bytes", before.limits.max_document_bytes,
          after.limits.max_document_bytes);
  compare("limits.max_bucket_pages", before.limits.max_bucket_pages,
          after.limits.max_bucket_pages);
  if (before.feed.has_value() != after.feed.has_value()) {
    changed.push_back("feed");
  } else if (before.feed) {
    const FeedConfig& a = *before.feed;
    const FeedConfig& b = *after.feed;
    compare("feed.brokers", a.brokers, b.brokers);
    compare("feed.topic", a.topic, b.topic);
    compare("feed.collections", a.collections, b.collections);
    compare("feed.transactional_id", a.transactional_id, b.transactional_id);
    compare("feed.progress_topic", a.progress_topic, b.progress_topic);
    compare("feed.max_messages", a.max_messages, b.max_messages);
    compare("feed.max_message_bytes", a.max_message_bytes, b.max_message_bytes);
    compare("feed.poll_ms", a.poll_ms, b.poll_ms);
    compare("feed.properties", NormalizedProperties(a.properties), NormalizedProperties(b.properties));
  }
  compare("log.level", before.log.level, after.log.level);
  compare("log.format", before.log.format, after.log.format);
  compare("entities", before.entities, after.entities);
  // Projections in the order of `after`, then those `after` dropped.
  for (const ProjectionConfig& projection : after.projections) {
    const ProjectionConfig* old = before.FindProjection(projection.name);
    if (old == nullptr || NormalizedProjection(*old) != NormalizedProjection(projection)) {
      changed.push_back("projections." + projection.name);
    }
  }
  for (const ProjectionConfig& projection : before.projections) {
    if (after.FindProjection(projection.name) == nullptr) {
      changed.push_back("projections." + projection.name);
    }
  }
  return changed;
}

std::string NormalizedProjectionText(const ProjectionConfig& projection) {
  return NormalizedProjection(projection);
}

std::string NormalizedModel(const Config& config) {
  std::vector<std::string> entities = config.entities;
  std::sort(entities.begin(), entities.end());
  std::string out = "entities " + JoinList(entities) + "\n";
  std::vector<const ProjectionConfig*> projections;
  for (const ProjectionConfig& projection : config.projections) projections.push_back(&projection);
  std::sort(projections.begin(), projections.end(),
            [](const ProjectionConfig* a, const ProjectionConfig* b) { return a->name < b->name; });
  for (const ProjectionConfig* projection : projections) {
    out += "projection " + projection->name + ": " + NormalizedProjection(*projection) + "\n";
  }
  return out;
}

std::string ModelFingerprint(const Config& config) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(Fnv1a64(NormalizedModel(config))));
  return text;
}

std::optional<Config> WithModel(const Config& base, const std::string& model_yaml,
                                const std::string& origin, const DerivationSyntaxes& kinds,
                                std::vector<ConfigError>* errors, bool without_feed) {
  std::vector<ConfigError> local_errors;
  if (errors == nullptr) errors = &local_errors;
  errors->clear();
  std::string text;
  try {
    YAML::Node document = YAML::Load(base.source_text);
    const YAML::Node model = YAML::Load(model_yaml);
    if (!document.IsMap() || !model.IsMap()) {
      errors->push_back(ConfigError{{}, origin, "not a YAML mapping"});
      return std::nullopt;
    }
    for (const char* section : {"entities", "projections"}) {
      document.remove(section);
      if (model[section]) document[section] = model[section];
    }
    if (without_feed) document.remove("feed");
    YAML::Emitter out;
    out << document;
    text = out.c_str();
  } catch (const YAML::Exception& e) {
    errors->push_back(ConfigError{{}, origin, "cannot read: " + e.msg});
    return std::nullopt;
  }
  std::optional<Config> parsed = ParseConfig(text, origin, kinds, errors);
  if (!parsed) return std::nullopt;
  Config config = base;
  if (without_feed) config.feed.reset();
  config.entities = std::move(parsed->entities);
  config.projections = std::move(parsed->projections);
  config.model_yaml = std::move(parsed->model_yaml);
  return config;
}

bool Config::HasEntity(const std::string& type) const {
  return std::find(entities.begin(), entities.end(), type) != entities.end();
}

std::vector<std::string> Config::CollectionNames() const {
  std::vector<std::string> names;
  for (const ProjectionConfig& projection : projections) names.push_back(projection.collection);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

const ProjectionConfig* Config::FindProjection(const std::string& name) const {
  for (const ProjectionConfig& projection : projections) {
    if (projection.name == name) return &projection;
  }
  return nullptr;
}

std::vector<std::string> Config::PublishedCollections() const {
  std::vector<std::string> out;
  if (!feed) return out;
  for (const std::string& collection : CollectionNames()) {
    if (feed->TopicOf(collection) != nullptr) out.push_back(collection);
  }
  return out;
}

bool Config::HasPartitionKey(const std::string& collection) const {
  for (const ProjectionConfig& projection : projections) {
    if (projection.collection == collection && !projection.partition_key.empty()) return true;
  }
  return false;
}

const std::string* FeedConfig::TopicOf(const std::string& collection) const {
  for (const auto& entry : collections) {
    if (entry.first == collection) return &entry.second;
  }
  return topic.empty() ? nullptr : &topic;
}

std::string ConfigError::ToString(const std::string& file) const {
  std::string out = file;
  if (place.line > 0) {
    out += ":" + std::to_string(place.line);
    if (place.column > 0) out += ":" + std::to_string(place.column);
  }
  if (!out.empty()) out += ": ";
  if (!where.empty()) out += where + ": ";
  return out + message;
}

std::optional<Config> ParseConfig(const std::string& yaml_text, const std::string& file,
                                  const DerivationSyntaxes& kinds,
                                  std::vector<ConfigError>* errors) {
  std::vector<ConfigError> local_errors;
  if (errors == nullptr) errors = &local_errors;
  errors->clear();
  Config config;
  config.path = file;
  try {
    // YAML::Load reads the first document only; SecondDocumentPlace reports
    // any more without LoadAll (see there).
    const YAML::Node document = YAML::Load(yaml_text);
    if (const std::optional<ConfigPlace> second = SecondDocumentPlace(yaml_text)) {
      errors->push_back(
          ConfigError{*second, "", "the file holds several YAML documents; give one"});
    }
    ConfigParser(kinds, errors).Parse(document, &config);
    config.source_text = yaml_text;
    if (document.IsMap()) {
      YAML::Emitter model;
      model << YAML::BeginMap;
      for (const char* section : {"entities", "projections"}) {
        if (document[section]) model << YAML::Key << section << YAML::Value << document[section];
      }
      model << YAML::EndMap;
      config.model_yaml = model.c_str();
    }
  } catch (const YAML::Exception& e) {
    const ConfigPlace place =
        e.mark.is_null() ? ConfigPlace{} : ConfigPlace{e.mark.line + 1, e.mark.column + 1};
    errors->push_back(ConfigError{place, "", "YAML syntax error: " + e.msg});
  } catch (const std::exception& e) {
    errors->push_back(ConfigError{{}, "", std::string("cannot parse: ") + e.what()});
  }
  if (errors->empty()) return config;
  // File order; errors without a place last. stable_sort keeps the walk's
  // order among errors at one place.
  std::stable_sort(errors->begin(), errors->end(), [](const ConfigError& a, const ConfigError& b) {
    const auto key = [](const ConfigError& e) {
      return std::make_pair(e.place.line > 0 ? e.place.line : INT_MAX, e.place.column);
    };
    return key(a) < key(b);
  });
  return std::nullopt;
}

std::optional<Config> LoadConfig(const std::string& file, const DerivationSyntaxes& kinds,
                                 std::vector<ConfigError>* errors) {
  std::vector<ConfigError> local_errors;
  if (errors == nullptr) errors = &local_errors;
  errors->clear();
  std::FILE* stream = std::fopen(file.c_str(), "rb");
  std::string text;
  int read_errno = stream ? 0 : errno;
  if (stream) {
    char buffer[65536];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, stream)) > 0) text.append(buffer, n);
    if (std::ferror(stream)) read_errno = errno ? errno : EIO;
    std::fclose(stream);
  }
  if (read_errno != 0) {
    errors->push_back(ConfigError{{}, "", "cannot read the config file: " +
                                              std::string(std::strerror(read_errno))});
    return std::nullopt;
  }
  return ParseConfig(text, file, kinds, errors);
}

}  // namespace denormd
