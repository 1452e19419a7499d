#include "projections/projection_plan.h"

namespace denormd {

ProjectionPlan::ProjectionPlan(const Config& config) : config_(config) {
  for (size_t p = 0; p < config.projections.size(); ++p) {
    const ProjectionConfig& projection = config.projections[p];
    if (projection.kind == ProjectionConfig::Kind::kBuckets) {
      types_[projection.buckets].bucket_projections.push_back(p);
      AddReferenceField(projection.buckets, &projection.by);
      continue;
    }
    types_[projection.from].own_projections.push_back(p);
    for (const auto& field : projection.fields) {
      const Expression& expression = field.second;
      switch (expression.kind) {
        case Expression::Kind::kCount:
        case Expression::Kind::kIds:
        case Expression::Kind::kEmbed:
          types_[expression.entity].as_child.push_back({p, &expression});
          AddReferenceField(expression.entity, &expression.via);
          break;
        case Expression::Kind::kLookup:
          types_[expression.entity].as_lookup_target.push_back({p, &expression});
          types_[projection.from].lookups.push_back({p, &expression});
          AddReferenceField(projection.from, &expression.by);
          break;
        default:
          break;
      }
    }
  }
}

void ProjectionPlan::AddReferenceField(const std::string& type, const Path* path) {
  std::vector<const Path*>& fields = types_[type].reference_fields;
  for (const Path* existing : fields) {
    if (existing->text == path->text) return;
  }
  fields.push_back(path);
}

const EntityTypePlan& ProjectionPlan::ForType(const std::string& type) const {
  auto it = types_.find(type);
  return it == types_.end() ? empty_ : it->second;
}

}  // namespace denormd
