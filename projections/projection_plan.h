// ProjectionPlan: the configuration turned inside out. For each entity type it
// lists which documents a change of such an entity can affect, and which of
// its fields the reference index must cover.
//
// A document depends only on its root entity and on entities one relation
// away (count/ids/embed children, lookup targets, bucket members), so a change
// never propagates further than one step. Immutable after construction;
// borrows the Config, which must outlive it.
#ifndef DENORMD_PROJECTIONS_PROJECTION_PLAN_H_
#define DENORMD_PROJECTIONS_PROJECTION_PLAN_H_

#include <map>
#include <string>
#include <vector>

#include "config/config.h"

namespace denormd {

// A field of projection `projection` whose value is derived from entities of
// another type through `expression` (count, ids, embed or lookup).
struct RelationUse {
  size_t projection = 0;
  const Expression* expression = nullptr;
};

// A relation in the reference index: which ids an entity names in `path`
// (the string, or the array's strings; only a string when `strings_only`),
// each row carrying the entity's sort key for `order` (OrderKey; empty when
// there is no order, i.e. ordered by id). Its rows are stored under `name`,
// so PostgreSQL can count, order and page an entity's children by index.
struct Relation {
  std::string name;
  const Path* path = nullptr;
  const OrderBy* order = nullptr;  // null or !present: by id
  bool strings_only = false;       // buckets: only string values group
};

// The relation name for a path, an optional order and the grouping flag.
std::string RelationName(const Path& path, const OrderBy* order, bool strings_only);

struct EntityTypePlan {
  // Entity projections `from` this type: the entity's own documents.
  std::vector<size_t> own_projections;
  // count/ids/embed fields whose children are of this type: a change affects
  // the documents of the parents named by the child's `via` field.
  std::vector<RelationUse> as_child;
  // lookup fields whose targets are of this type: a change affects the
  // documents whose `by` field names this entity.
  std::vector<RelationUse> as_lookup_target;
  // lookup fields of projections from this type (their targets are locked
  // when such an entity changes; see BatchApplier).
  std::vector<RelationUse> lookups;
  // bucket projections grouping this type.
  std::vector<size_t> bucket_projections;
  // The relations whose rows the reference index stores for entities of this
  // type, unique by name.
  std::vector<Relation> relations;
};

class ProjectionPlan {
 public:
  explicit ProjectionPlan(const Config& config);

  const Config& config() const { return config_; }

  // What the reference index holds, as text: each entity type with the names
  // of its relations. An index built for another fingerprint lacks rows (or
  // sort keys) the projections need, and must be rebuilt.
  std::string IndexFingerprint() const;
  // The plan of `type`; an empty plan for a type no projection mentions.
  const EntityTypePlan& ForType(const std::string& type) const;

 private:
  void AddRelation(const std::string& type, const Path* path, const OrderBy* order,
                   bool strings_only);

  const Config& config_;
  std::map<std::string, EntityTypePlan> types_;
  EntityTypePlan empty_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_PROJECTION_PLAN_H_
