// ProjectionPlan: the configuration turned into the engine's objects and
// inside out.
//
// It builds one Projection per configured projection (entity projections
// with a Derivation per field; bucket projections), owns the Relation
// objects they read (one per distinct relation; handed out through
// PlanBuilder::UseRelation, never re-spelled) and the Links built on them
// (PlanBuilder::UseLink), and lists for each entity type
// which projections and derivations a change of such an entity can affect,
// and which relations the reference index keeps for it.
//
// A document depends only on its root entity and on entities one relation
// away (count/ids/embed children, lookup targets, bucket members), or two
// through a link row (count/ids/lookup `through`: the link, then the entity
// it names), so a change never propagates further than that. Immutable after
// construction; borrows the Config, which must outlive it.
#ifndef DENORMD_PROJECTIONS_PROJECTION_PLAN_H_
#define DENORMD_PROJECTIONS_PROJECTION_PLAN_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "projections/derivation.h"
#include "projections/projection.h"
#include "projections/relation.h"

namespace denormd {

struct EntityTypePlan {
  // Projections whose units a change of such an entity names directly
  // (entity projections from it; bucket projections grouping it).
  std::vector<const Projection*> projections;
  // Derivations of other documents that a change of such an entity can
  // affect (count/ids/embed of its parents, lookups of it, lookups by it).
  std::vector<const Derivation*> dependents;
  // The relations the reference index keeps rows of for such an entity.
  std::vector<const Relation*> relations;
};

// A field that reads a relation or a link (a bucket projection's grouping:
// field ""), as the plan bound it: what `denormd advise` measures.
struct RelationUse {
  size_t projection = 0;              // index in Config::projections
  std::string field;                  // the document's field; "" for buckets
  const Relation* relation = nullptr; // kReferences or kGroup; null through a link
  const Link* link = nullptr;         // through a link; null otherwise
};

// Tuning of the engine that does not change what it computes.
struct PlanOptions {
  // Members read per bucket group and page when a bucket tail is rewritten
  // (small values exercise paging in tests).
  uint64_t bucket_page_rows = 2000;
};

class ProjectionPlan {
 public:
  explicit ProjectionPlan(const Config& config, PlanOptions options = PlanOptions());
  ~ProjectionPlan();
  ProjectionPlan(const ProjectionPlan&) = delete;
  ProjectionPlan& operator=(const ProjectionPlan&) = delete;

  const Config& config() const { return config_; }
  // In Config::projections order.
  const std::vector<std::unique_ptr<Projection>>& projections() const { return projections_; }
  const Projection& projection(size_t index) const { return *projections_[index]; }

  // Every entity type whose changes can change documents of projection
  // `index`: its unit type and every type one of its fields depends on
  // (Derivation::DependsOn), ascending.
  const std::vector<std::string>& TypesRead(size_t index) const { return types_read_[index]; }

  // The plan of `type`; an empty plan for a type no projection mentions.
  const EntityTypePlan& ForType(const std::string& type) const;

  // The relations kept through a link (Relation::Flavour::kLinked), whose
  // rows are not read from their entity's data (projections/linked_rows.h).
  const std::vector<const Relation*>& linked_relations() const { return linked_relations_; }

  // Every relation the index keeps rows of, in the order they were made.
  const std::vector<std::unique_ptr<Relation>>& relations() const { return relations_; }

  // Each (projection, field) reading a relation or a link, once, in config
  // order.
  const std::vector<RelationUse>& relation_uses() const { return relation_uses_; }

  // The reference-index rows an entity's data names (none for a tombstone;
  // none of a kLinked relation).
  std::vector<ReferenceRow> ReferenceRowsOf(const EntityRecord& record) const;

  // What the reference index holds, as text: each entity type with the names
  // of its relations. An index built for another fingerprint lacks rows (or
  // sort keys) the projections need, and must be rebuilt.
  std::string IndexFingerprint() const;

 private:
  class Builder;
  void Build(Builder& builder, const PlanOptions& options);

  const Config& config_;
  std::vector<std::unique_ptr<Relation>> relations_;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<std::unique_ptr<OrderBy>> side_orders_;  // of link sides (Builder::SideOrder)
  std::vector<const Relation*> linked_relations_;
  std::vector<RelationUse> relation_uses_;
  std::vector<std::unique_ptr<Projection>> projections_;
  std::vector<std::vector<std::string>> types_read_;  // per projection
  std::map<std::string, EntityTypePlan> types_;
  EntityTypePlan empty_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_PROJECTION_PLAN_H_
