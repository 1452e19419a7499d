// The model's sections (config_sections.h): `entities` and `projections`,
// entity and buckets projections, and the checks across projections that
// share a collection.
#include <algorithm>
#include <map>
#include <set>

#include "config/config_sections.h"

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
