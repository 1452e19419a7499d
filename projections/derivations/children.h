// What count, ids and embed share: the documents of the parents a child
// entity names through `via`, and how a child's change reaches them.
#ifndef DENORMD_PROJECTIONS_DERIVATIONS_CHILDREN_H_
#define DENORMD_PROJECTIONS_DERIVATIONS_CHILDREN_H_

#include <string>

#include "projections/affected.h"
#include "projections/entity.h"
#include "projections/relation.h"

namespace denormd {

// Parsed `{KIND: T, via: F, ...}`: the child type and its reference field.
struct ChildrenSpec {
  std::string entity;
  Path via;
};

// Adds the parents whose children changed: those the child names before but
// not after or after but not before (membership); with `payload` (what the
// parent shows of the child changed), every parent it names before or after.
// With `record_moves`, also records the membership changes in out->moves
// (the child left the first kind of parent, joined the second).
void AddParentsOfChild(const Relation& via, size_t projection, const EntityChange& change,
                       bool payload, AffectedUnits* out, bool record_moves = false);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_DERIVATIONS_CHILDREN_H_
