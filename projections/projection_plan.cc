#include "projections/projection_plan.h"

#include <algorithm>

namespace denormd {

ProjectionPlan::ProjectionPlan(const Config& config) : config_(config) {
  for (size_t p = 0; p < config.projections.size(); ++p) {
    const ProjectionConfig& projection = config.projections[p];
    if (projection.kind == ProjectionConfig::Kind::kBuckets) {
      types_[projection.buckets].bucket_projections.push_back(p);
      AddRelation(projection.buckets, &projection.by, &projection.order_by, true);
      continue;
    }
    types_[projection.from].own_projections.push_back(p);
    for (const auto& field : projection.fields) {
      const Expression& expression = field.second;
      switch (expression.kind) {
        case Expression::Kind::kCount:
        case Expression::Kind::kIds:
          types_[expression.entity].as_child.push_back({p, &expression});
          AddRelation(expression.entity, &expression.via, nullptr, false);
          break;
        case Expression::Kind::kEmbed:
          types_[expression.entity].as_child.push_back({p, &expression});
          AddRelation(expression.entity, &expression.via, &expression.order_by, false);
          break;
        case Expression::Kind::kLookup:
          types_[expression.entity].as_lookup_target.push_back({p, &expression});
          types_[projection.from].lookups.push_back({p, &expression});
          AddRelation(projection.from, &expression.by, nullptr, false);
          break;
        default:
          break;
      }
    }
  }
}

std::string RelationName(const Path& path, const OrderBy* order, bool strings_only) {
  std::string name = path.text;
  if (order != nullptr && order->present) {
    name += std::string(" order ") + (order->descending ? "-" : "") + order->path.text;
  }
  if (strings_only) name += " group";
  return name;
}

void ProjectionPlan::AddRelation(const std::string& type, const Path* path, const OrderBy* order,
                                 bool strings_only) {
  Relation relation{RelationName(*path, order, strings_only), path,
                    order != nullptr && order->present ? order : nullptr, strings_only};
  std::vector<Relation>& relations = types_[type].relations;
  for (const Relation& existing : relations) {
    if (existing.name == relation.name) return;
  }
  relations.push_back(relation);
}

std::string ProjectionPlan::IndexFingerprint() const {
  std::string out;
  for (const auto& type : types_) {
    if (type.second.relations.empty()) continue;
    out += type.first + ":";
    std::vector<std::string> names;
    for (const Relation& relation : type.second.relations) names.push_back(relation.name);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) out += " [" + name + "]";
    out += "\n";
  }
  return out;
}

const EntityTypePlan& ProjectionPlan::ForType(const std::string& type) const {
  auto it = types_.find(type);
  return it == types_.end() ? empty_ : it->second;
}

}  // namespace denormd
