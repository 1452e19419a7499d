#include "projections/model_change.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/text.h"
#include "projections/projection_plan.h"

namespace denormd {

namespace {

std::string Quoted(const std::string& text) { return text.empty() ? "(none)" : text; }

// "<what>: <before> -> <after>" when they differ.
void CompareSetting(const std::string& what, const std::string& before, const std::string& after,
                    std::vector<std::string>* details) {
  if (before != after) details->push_back(what + ": " + Quoted(before) + " -> " + Quoted(after));
}

std::string FieldText(const Expression& expression) {
  const std::string text = NormalizedExpression(expression);
  return text.empty() ? expression.derivation : text;
}

std::vector<std::string> EntityFieldChanges(const ProjectionConfig& a, const ProjectionConfig& b) {
  std::vector<std::string> details;
  CompareSetting("from", a.from, b.from, &details);
  CompareSetting("collection", a.collection, b.collection, &details);
  CompareSetting("include", a.has_include ? "[" + Joined(a.include) + "]" : "",
                 b.has_include ? "[" + Joined(b.include) + "]" : "", &details);
  CompareSetting("exclude", Joined(a.exclude), Joined(b.exclude), &details);
  CompareSetting("partition_key", a.partition_key, b.partition_key, &details);
  std::map<std::string, std::string> old_fields;
  for (const auto& field : a.fields) old_fields[field.first] = FieldText(field.second);
  std::set<std::string> seen;
  for (const auto& field : b.fields) {
    seen.insert(field.first);
    const std::string text = FieldText(field.second);
    auto old = old_fields.find(field.first);
    if (old == old_fields.end()) {
      details.push_back("field " + field.first + " added: " + text);
    } else if (old->second != text) {
      details.push_back("field " + field.first + " changed: " + old->second + " -> " + text);
    }
  }
  for (const auto& field : a.fields) {
    if (!seen.count(field.first)) details.push_back("field " + field.first + " removed");
  }
  return details;
}

std::vector<std::string> BucketChanges(const ProjectionConfig& a, const ProjectionConfig& b) {
  std::vector<std::string> details;
  CompareSetting("buckets", a.buckets, b.buckets, &details);
  CompareSetting("collection", a.collection, b.collection, &details);
  CompareSetting("by", a.by.text, b.by.text, &details);
  CompareSetting("size", std::to_string(a.size), std::to_string(b.size), &details);
  CompareSetting("order_by", NormalizedOrderBy(a.order_by), NormalizedOrderBy(b.order_by),
                 &details);
  CompareSetting("field", a.field, b.field, &details);
  CompareSetting("select", NormalizedSelection(a.select), NormalizedSelection(b.select), &details);
  const auto layout = [](const ProjectionConfig& p) {
    return p.layout == ProjectionConfig::BucketLayout::kStable ? "stable" : "packed";
  };
  CompareSetting("layout", layout(a), layout(b), &details);
  return details;
}

std::set<std::string> RelationsOf(const Config& config) {
  const ProjectionPlan plan(config);
  std::set<std::string> out;
  for (const std::string& type : config.entities) {
    for (const Relation* relation : plan.ForType(type).relations) {
      out.insert(type + " " + relation->name());
    }
  }
  return out;
}

std::vector<std::string> Minus(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::vector<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace

const char* ProjectionChangeKindName(ProjectionChange::Kind kind) {
  switch (kind) {
    case ProjectionChange::Kind::kAdded: return "added";
    case ProjectionChange::Kind::kRemoved: return "removed";
    case ProjectionChange::Kind::kChanged: return "changed";
  }
  return "changed";
}

ModelChange CompareModels(const Config& before, const Config& after) {
  ModelChange change;
  const std::set<std::string> old_entities(before.entities.begin(), before.entities.end());
  const std::set<std::string> new_entities(after.entities.begin(), after.entities.end());
  change.entities_added = Minus(new_entities, old_entities);
  change.entities_removed = Minus(old_entities, new_entities);

  std::set<std::string> touched;  // collections, old or new, of changed projections
  for (const ProjectionConfig& projection : after.projections) {
    const ProjectionConfig* old = before.FindProjection(projection.name);
    if (old != nullptr &&
        NormalizedProjectionText(*old) == NormalizedProjectionText(projection)) {
      continue;
    }
    ProjectionChange entry;
    entry.name = projection.name;
    entry.collection = projection.collection;
    if (old == nullptr) {
      entry.kind = ProjectionChange::Kind::kAdded;
    } else {
      entry.kind = ProjectionChange::Kind::kChanged;
      entry.details = old->kind != projection.kind
                          ? std::vector<std::string>{"kind: entity <-> buckets"}
                      : projection.kind == ProjectionConfig::Kind::kEntity
                          ? EntityFieldChanges(*old, projection)
                          : BucketChanges(*old, projection);
      if (entry.details.empty()) entry.details.push_back("a derivation's meaning changed");
      touched.insert(old->collection);
    }
    touched.insert(projection.collection);
    change.projections.push_back(std::move(entry));
  }
  for (const ProjectionConfig& projection : before.projections) {
    if (after.FindProjection(projection.name) != nullptr) continue;
    ProjectionChange entry;
    entry.name = projection.name;
    entry.collection = projection.collection;
    entry.kind = ProjectionChange::Kind::kRemoved;
    touched.insert(projection.collection);
    change.projections.push_back(std::move(entry));
  }
  // A collection whose set of projections is the same but one of which
  // changed is rebuilt; one the new model no longer has is dropped.
  const std::vector<std::string> new_collections = after.CollectionNames();
  for (const std::string& collection : touched) {
    if (std::binary_search(new_collections.begin(), new_collections.end(), collection)) {
      change.collections_rebuilt.push_back(collection);
    } else {
      change.collections_dropped.push_back(collection);
    }
  }
  const std::set<std::string> old_relations = RelationsOf(before);
  const std::set<std::string> new_relations = RelationsOf(after);
  change.relations_added = Minus(new_relations, old_relations);
  change.relations_dropped = Minus(old_relations, new_relations);
  return change;
}

}  // namespace denormd
