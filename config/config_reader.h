// The reader under the configuration parser: typed reads of a YAML tree, each
// problem recorded as a ConfigError with its dotted location and its place in
// the file. Private to config/: nothing outside the folder includes it.
//
// Every section of the file (config/config_sections.h) is read through one
// ConfigReader. A read never stops at the first problem: each Read* reports
// what is wrong and returns false, and the caller goes on with the next key,
// so that `denormd check` lists every error at once. Error texts and places
// are part of denormd's interface (tests/config/, the fuzzer's corpus, the
// docs' examples): keep them as they are.
#ifndef DENORMD_CONFIG_CONFIG_READER_H_
#define DENORMD_CONFIG_CONFIG_READER_H_

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "config/config.h"

namespace denormd {
namespace config_internal {

using KeyList = std::vector<std::string>;

bool Contains(const KeyList& list, const std::string& s);
// `s` in double quotes, for messages.
std::string Quote(const std::string& s);
// "a, b, c".
std::string JoinKeys(const KeyList& keys);
// "a, b or c" (a choice among them).
std::string JoinChoices(const KeyList& choices);
// " (did you mean "x"?)" for the closest candidate at distance <= 2 (and
// shorter than the word itself, so that "x" does not suggest "by"); else "".
std::string Suggestion(const std::string& word, const KeyList& candidates);
// A Kafka topic name: 1..249 of [a-zA-Z0-9._-], not "." or "..".
bool IsKafkaTopicName(const std::string& s);

// Where `node` starts in the file; {} when yaml-cpp knows no place.
ConfigPlace PlaceOf(const YAML::Node& node);
// What a node is, for "expected ..., found ..." messages: `the scalar "x"`,
// "a list", "a map" or "nothing".
std::string Describe(const YAML::Node& node);
// "parent.key"; an empty key shows as "".
std::string Child(const std::string& where, const std::string& key);

// {value: X} as compact JSON. `s` as a JSON string, quotes included.
void AppendJsonString(const std::string& s, std::string* out);
// Appends `node` as compact JSON (plain scalars resolved as the YAML 1.2 core
// schema does); InvalidInput when it has no JSON form (a non-string key, a
// duplicate key).
Status AppendJson(const YAML::Node& node, std::string* out);

// A YAML node with its dotted location and the place to report it at (for a
// null map value, the place of its key: yaml-cpp marks nulls at the next token).
struct Item {
  YAML::Node node;
  std::string where;
  ConfigPlace place;
};

// One entry of a map: its key, where the key was written, and its value.
struct Entry {
  std::string key;
  ConfigPlace key_place;
  Item value;
};

// Reads one configuration file's tree, collecting its errors. Holds what the
// sections learn of each other: the declared entity types (DeclareEntityTypes)
// and the keys found unknown (for Require's "given as" hint). Not
// thread-safe; lives for one ParseConfig.
class ConfigReader {
 public:
  // `syntax` (the derivation kinds expressions may use, the input formats
  // topics may have) and `errors` must outlive the reader; errors are
  // appended in the order they are met.
  ConfigReader(const ConfigSyntax& syntax, std::vector<ConfigError>* errors)
      : syntax_(syntax), errors_(errors) {}

  const DerivationSyntaxes& kinds() const { return syntax_.derivations; }
  const InputFormatSyntaxes& formats() const { return syntax_.formats; }

  void Error(const ConfigPlace& place, const std::string& where, const std::string& message) {
    errors_->push_back(ConfigError{place, where, message});
  }
  void Error(const Item& item, const std::string& message) {
    Error(item.place, item.where, message);
  }
  // How many errors were recorded so far: a read that must know whether it
  // added any compares the count before and after.
  size_t error_count() const { return errors_->size(); }

  // Generic shapes. Each reports what is wrong and returns false on failure.
  bool ExpectMap(const Item& item);
  // The map's entries in file order; reports non-string and duplicate keys
  // and leaves them out.
  std::vector<Entry> Entries(const Item& item);
  // The map's entries by key, reporting keys not in `allowed`. A key that is
  // in `known_elsewhere` is named as misplaced in `context` rather than
  // unknown; an unknown key is remembered for Require.
  std::map<std::string, Item> ReadKeys(const Item& item, const KeyList& allowed,
                                       const std::string& context = "",
                                       const KeyList& known_elsewhere = {});
  // Whether `keys` (read from `parent` by ReadKeys) has `key`; reports it
  // missing, at its misspelling when ReadKeys met one.
  bool Require(const Item& parent, const std::map<std::string, Item>& keys,
               const std::string& key);
  bool ReadString(const Item& item, std::string* out);
  bool ReadNonEmptyString(const Item& item, std::string* out);
  bool ReadUint(const Item& item, uint64_t min, uint64_t* out);
  // ReadUint, and at most `max` (`why` says what a larger value would do).
  bool ReadBoundedUint(const Item& item, uint64_t min, uint64_t max, const std::string& why,
                       uint64_t* out);
  // A list of non-empty strings, appended to *out (the good ones, even when
  // some are bad).
  bool ReadStringList(const Item& item, bool non_empty, std::vector<std::string>* out);
  bool ReadPath(const Item& item, Path* out);
  // "createdAt" or "-createdAt".
  bool ReadOrderBy(const Item& item, OrderBy* out);
  // A declared entity type; any non-empty name before DeclareEntityTypes
  // (the entities section is missing or broken: its error is enough).
  bool ReadEntityType(const Item& item, std::string* out);
  // `name` (read from `item`) as a table or schema name: a plain SQL
  // identifier. With `check_reserved`, also a name a collection may have:
  // short enough for its indexes, not a table denormd keeps itself.
  bool ReadSqlName(const Item& item, const std::string& what, const std::string& name,
                   bool check_reserved);

  // The entity types of the `entities` section; from now on ReadEntityType
  // checks against them.
  void DeclareEntityTypes(const std::vector<std::string>& types);
  // Whether DeclareEntityTypes was called, and whether `type` is one of them.
  bool entity_types_known() const { return entities_known_; }
  bool IsEntityType(const std::string& type) const { return entities_.count(type) > 0; }

 private:
  const ConfigSyntax& syntax_;
  std::vector<ConfigError>* errors_;
  std::set<std::string> entities_;
  bool entities_known_ = false;  // false: skip entity checks (entities is broken)
  // Keys ReadKeys found unknown, by the `where` of their map: Require says a
  // missing key at its misspelling.
  std::map<std::string, std::vector<std::pair<std::string, ConfigPlace>>> unknown_keys_;
};

// One map's keys (as ConfigReader::ReadKeys returns them) by name: what the
// readers handed to an extension (a derivation kind's ExpressionReader, an
// input format's TopicReader) read through. `reader` and `item` (the map)
// must outlive it.
class MapKeys {
 public:
  MapKeys(ConfigReader* reader, const Item& item, std::map<std::string, Item> keys)
      : reader_(reader), item_(item), keys_(std::move(keys)) {}

  bool Has(const std::string& key) const { return keys_.count(key) > 0; }
  // The value of `key`; null after reporting it missing (ConfigReader::Require).
  const Item* Require(const std::string& key) {
    return reader_->Require(item_, keys_, key) ? &keys_.at(key) : nullptr;
  }
  // Reports `message` at `key`'s value, or at the map when it has no `key`.
  void Error(const std::string& key, const std::string& message) {
    auto it = keys_.find(key);
    reader_->Error(it == keys_.end() ? item_ : it->second, message);
  }

 private:
  ConfigReader* reader_;
  const Item& item_;
  std::map<std::string, Item> keys_;
};

}  // namespace config_internal
}  // namespace denormd

#endif  // DENORMD_CONFIG_CONFIG_READER_H_
