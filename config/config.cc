// Parsing and validation of the denormd configuration (see config.h and
// docs/configuration.md): the file and its top level. The sections are read
// by config_sections.h's functions over a ConfigReader (config_reader.h).
//
// The parser walks the YAML tree once, filling the plain structs of config.h
// and recording every problem it meets as a ConfigError; it never stops at the
// first one. Checks that need the whole file (entity types, collections shared
// by several projections) run after the walk. yaml-cpp exceptions are caught
// at the boundary: nothing here throws to the caller.
#include "config/config.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "config/config_reader.h"
#include "config/config_sections.h"

namespace denormd {
namespace {

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

}  // namespace

namespace config_internal {
namespace {

const KeyList kTopKeys = {"source", "store", "batch", "retention", "limits", "log", "entities",
                          "projections", "feed"};

// Fills *config from the document `root`; problems go to `reader`.
void ReadSections(ConfigReader& reader, const YAML::Node& root, Config* config) {
  const Item top{root, "", PlaceOf(root)};
  if (root.IsNull()) {
    reader.Error(top, "the configuration is empty");
    return;
  }
  if (!root.IsMap()) {
    reader.Error(top, "the configuration must be a map with the keys " + JoinKeys(kTopKeys) +
                          ", found " + Describe(root));
    return;
  }
  const std::map<std::string, Item> keys = reader.ReadKeys(top, kTopKeys);
  const auto section = [&keys](const std::string& key) { return keys.find(key); };
  // Entities first: the source names entity types (errors are sorted into
  // file order at the end).
  if (reader.Require(top, keys, "entities")) {
    ReadEntities(reader, section("entities")->second, config);
  }
  if (section("source") != keys.end()) ReadSource(reader, section("source")->second, config);
  if (reader.Require(top, keys, "store")) ReadStore(reader, section("store")->second, config);
  if (section("batch") != keys.end()) ReadBatch(reader, section("batch")->second, config);
  if (section("retention") != keys.end()) {
    ReadRetention(reader, section("retention")->second, config);
  }
  if (section("limits") != keys.end()) ReadLimits(reader, section("limits")->second, config);
  if (section("log") != keys.end()) ReadLog(reader, section("log")->second, config);
  if (reader.Require(top, keys, "projections")) {
    ReadProjections(reader, section("projections")->second, config);
  }
  // Last: the feed is checked against the projections and the source.
  if (section("feed") != keys.end()) ReadFeed(reader, section("feed")->second, config);
}

}  // namespace
}  // namespace config_internal

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
    config_internal::ConfigReader reader(kinds, errors);
    config_internal::ReadSections(reader, document, &config);
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

// ----------------------------------------------------------------------------
// The model's sections (config_sections.h): `entities` and `projections`,
// entity and buckets projections, and the checks across projections that
// share a collection.

namespace denormd {
namespace config_internal {
namespace {

const KeyList kProjectionKeys = {"from", "buckets", "collection", "include",
                                 "exclude", "fields", "partition_key", "by",
                                 "size", "order_by", "field", "select", "layout"};
const KeyList kEntityOnlyKeys = {"include", "exclude", "fields", "partition_key"};
const KeyList kBucketsOnlyKeys = {"by", "size", "order_by", "field", "select", "layout"};
constexpr uint64_t kMaxBucketSize = 1000000;

// Where each projection's collection and partition key were written, for the
// checks across projections.
struct CollectionUse {
  std::string where;
  ConfigPlace place;
};

void ReadEntityProjection(ConfigReader& reader, const std::map<std::string, Item>& keys,
                          ProjectionConfig* out) {
  out->kind = ProjectionConfig::Kind::kEntity;
  reader.ReadEntityType(keys.at("from"), &out->from);
  for (const std::string& key : kBucketsOnlyKeys) {
    if (keys.count(key)) {
      const Item& item = keys.at(key);
      const bool relation_key = key == "select" || key == "order_by";
      reader.Error(item, Quote(key) + " is only allowed in a buckets projection" +
                             (relation_key ? " or inside an embed or lookup" : ""));
    }
  }
  const auto include = keys.find("include");
  const auto exclude = keys.find("exclude");
  if (include != keys.end()) {
    out->has_include = true;
    reader.ReadStringList(include->second, false, &out->include);
  }
  if (exclude != keys.end()) {
    if (include != keys.end()) {
      reader.Error(exclude->second, "give either \"include\" or \"exclude\", not both");
    } else {
      reader.ReadStringList(exclude->second, false, &out->exclude);
    }
  }
  if (keys.count("partition_key")) {
    reader.ReadNonEmptyString(keys.at("partition_key"), &out->partition_key);
  }
  const auto fields = keys.find("fields");
  if (fields == keys.end() || !reader.ExpectMap(fields->second)) return;
  for (const Entry& entry : reader.Entries(fields->second)) {
    if (entry.key.empty()) {
      reader.Error(entry.key_place, entry.value.where, "a field name must not be empty");
      continue;
    }
    if (entry.key == "id") {
      reader.Error(entry.key_place, entry.value.where,
                   "\"id\" is the document's id and cannot be derived; choose another name");
      continue;
    }
    Expression expression;
    if (ReadExpression(reader, entry.value, false, out->from, &expression)) {
      out->fields.emplace_back(entry.key, std::move(expression));
    }
  }
}

void ReadBucketsProjection(ConfigReader& reader, const Item& item,
                           const std::map<std::string, Item>& keys, ProjectionConfig* out) {
  out->kind = ProjectionConfig::Kind::kBuckets;
  reader.ReadEntityType(keys.at("buckets"), &out->buckets);
  for (const std::string& key : kEntityOnlyKeys) {
    if (keys.count(key)) {
      reader.Error(keys.at(key), Quote(key) +
                                     " is not allowed in a buckets projection (allowed: " +
                                     JoinKeys(kBucketsOnlyKeys) + ", collection)");
    }
  }
  if (reader.Require(item, keys, "by")) reader.ReadPath(keys.at("by"), &out->by);
  if (keys.count("size")) {
    reader.ReadBoundedUint(keys.at("size"), 1, kMaxBucketSize, "one document holds them all",
                           &out->size);
  }
  if (keys.count("order_by")) reader.ReadOrderBy(keys.at("order_by"), &out->order_by);
  if (keys.count("select")) ReadSelection(reader, keys.at("select"), &out->select);
  if (keys.count("field")) {
    const Item& field = keys.at("field");
    if (reader.ReadNonEmptyString(field, &out->field) &&
        (out->field == "id" || out->field == "seq" || out->field == out->by.text)) {
      reader.Error(field, "field " + Quote(out->field) + " would overwrite the document's " +
                              Quote(out->field) + "; choose another name");
    }
  }
  if (out->by.text == "seq") {
    reader.Error(keys.at("by"),
                 "by \"seq\" would be overwritten by the bucket's seq; group by another field");
  }
  if (keys.count("layout")) {
    const Item& layout = keys.at("layout");
    std::string text;
    if (reader.ReadString(layout, &text)) {
      if (text == "stable") {
        out->layout = ProjectionConfig::BucketLayout::kStable;
      } else if (text == "packed") {
        out->layout = ProjectionConfig::BucketLayout::kPacked;
      } else {
        reader.Error(layout, "layout must be stable or packed, found " + Describe(layout.node));
      }
    }
  }
}

void ReadProjection(ConfigReader& reader, const Entry& entry, ProjectionConfig* out,
                    CollectionUse* use) {
  const Item& item = entry.value;
  out->name = entry.key;
  out->place = entry.key_place;
  out->collection = entry.key;
  *use = CollectionUse{item.where, entry.key_place};
  if (entry.key.empty()) {
    reader.Error(entry.key_place, item.where, "a projection name must not be empty");
  }
  if (!reader.ExpectMap(item)) return;
  const auto keys = reader.ReadKeys(item, kProjectionKeys);
  const bool has_from = keys.count("from") > 0;
  const bool has_buckets = keys.count("buckets") > 0;
  if (has_from && has_buckets) {
    reader.Error(item, "give either \"from\" or \"buckets\", not both");
  } else if (!has_from && !has_buckets) {
    reader.Error(item.place, item.where, "missing required key \"from\" or \"buckets\"");
  }
  const auto collection = keys.find("collection");
  if (collection != keys.end()) {
    use->where = collection->second.where;
    use->place = collection->second.place;
    if (reader.ReadString(collection->second, &out->collection)) {
      reader.ReadSqlName(collection->second, "collection", out->collection, true);
    }
  } else if (!entry.key.empty()) {
    reader.ReadSqlName(Item{item.node, item.where, entry.key_place},
                       "collection (the projection's name)", out->collection, true);
  }
  if (has_buckets) {
    ReadBucketsProjection(reader, item, keys, out);
  } else if (has_from) {
    ReadEntityProjection(reader, keys, out);
  }
}

// Projections sharing a collection must all have the same partition key, and
// a buckets projection shares its collection with no other. Also marks the
// projections of shared collections.
void CheckCollections(ConfigReader& reader, Config& config,
                      const std::vector<CollectionUse>& uses) {
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
        reader.Error(uses[i].place, uses[i].where,
                     shared + "; a buckets projection needs a collection of its own");
      } else if (p.partition_key.empty()) {
        reader.Error(uses[i].place, uses[i].where,
                     shared + " but this projection has no partition_key: two projections "
                              "writing different types into one collection without a "
                              "partition key");
      } else if (keys.size() > 1) {
        reader.Error(uses[i].place, uses[i].where,
                     shared + " with a different partition_key (this one: " +
                         Quote(p.partition_key) +
                         "); projections sharing a collection must declare the same "
                         "partition_key");
      }
    }
  }
}

}  // namespace

void ReadEntities(ConfigReader& reader, const Item& item, Config* config) {
  if (!item.node.IsSequence()) {
    reader.Error(item, "expected a list of entity types, found " + Describe(item.node));
    return;
  }
  std::vector<std::string> names;
  reader.ReadStringList(item, true, &names);
  std::map<std::string, size_t> first_index;
  for (size_t i = 0; i < item.node.size(); ++i) {
    const YAML::Node element = item.node[i];
    if (!element.IsScalar() || element.Scalar().empty()) continue;
    const std::string& name = element.Scalar();
    const auto [it, inserted] = first_index.emplace(name, i);
    if (inserted) {
      config->entities.push_back(name);
    } else {
      reader.Error(PlaceOf(element), item.where + "[" + std::to_string(i) + "]",
                   "duplicate entity type " + Quote(name) + " (also entities[" +
                       std::to_string(it->second) + "])");
    }
  }
  reader.DeclareEntityTypes(config->entities);
}

void ReadProjections(ConfigReader& reader, const Item& item, Config* config) {
  if (!reader.ExpectMap(item)) return;
  const std::vector<Entry> entries = reader.Entries(item);
  std::vector<CollectionUse> uses;
  for (const Entry& entry : entries) {
    ProjectionConfig projection;
    CollectionUse use;
    ReadProjection(reader, entry, &projection, &use);
    config->projections.push_back(std::move(projection));
    uses.push_back(std::move(use));
  }
  CheckCollections(reader, *config, uses);
}

}  // namespace config_internal
}  // namespace denormd
