// BucketProjection: `buckets: T` - the members of each group (the entities of
// T whose `by` field holds the group's string value) in documents of `size`,
// in `order_by` order. The article's "comments in documents of 100".
//
// Which member sits in which bucket is the layout's business (stable_layout.h,
// the default, and packed_layout.h); this class finds what a change moves
// (MemberChange, projections/affected.h), locks groups, renders whole groups
// (rebuild writes the packed layout for both), verifies and lists them.
#ifndef DENORMD_PROJECTIONS_BUCKETS_BUCKET_PROJECTION_H_
#define DENORMD_PROJECTIONS_BUCKETS_BUCKET_PROJECTION_H_

#include <map>
#include <string>
#include <vector>

#include "projections/buckets/packed_layout.h"
#include "projections/buckets/stable_layout.h"
#include "projections/derivation.h"
#include "projections/projection.h"

namespace denormd {

class BucketProjection : public Projection {
 public:
  // `page_rows`: members read per group and page when a tail is rewritten.
  BucketProjection(const ProjectionConfig& config, size_t index, PlanBuilder& plan,
                   uint64_t page_rows);

  const std::string& unit_type() const override { return config().buckets; }
  // The group relation: members by their `by` value, in `order_by` order.
  const Relation& relation() const { return relation_; }

  void CollectAffected(const EntityChange& change, AffectedUnits* out) const override;
  std::string LockKey(const std::string& unit) const override;
  // The stable layout's probes of the changed groups (StableLayout::
  // ReadAhead).
  void ReadAhead(StoreTransaction& txn, const std::set<std::string>& units,
                 const GroupChanges* changes) const override;
  Status Recompute(StoreTransaction& txn, const std::set<std::string>& units,
                   const GroupChanges* changes, const RelationMoves* moves,
                   BatchStats* stats) const override;
  Status VerifyFromSource(StoreTransaction& txn, SourceView& source,
                          const std::vector<std::string>& units,
                          std::vector<std::string>* differences) const override;
  Status ListDefinedUnits(StoreTransaction& txn, SourceView& source,
                          std::vector<std::string>* out) const override;
  Status ListSourceUnits(StoreTransaction& txn, const std::string& after, size_t limit,
                         std::vector<std::string>* out) const override;
  Status ListStoredUnits(StoreTransaction& txn, const std::string& after, size_t limit,
                         std::vector<std::string>* out) const override;

 private:
  // Of `units`, the groups with member changes (ApplyChanges'); the others
  // into *whole (when not null), which are rendered whole.
  GroupChanges ChangedGroups(const std::set<std::string>& units, const GroupChanges* changes,
                             std::vector<std::string>* whole) const;
  // The members of `group` by the config alone: the live entities of the
  // member type whose `by` is the group, in `order_by` order, each with its
  // key; a line in *differences for each pair that OrderKey's encoding puts
  // in another order than the config's (the index would then page wrong).
  std::vector<Referrer> DefinedMembers(SourceView& source, const std::string& group,
                                       std::vector<std::string>* differences) const;
  // Renders `groups` whole and replaces their stored buckets.
  Status RewriteGroups(StoreTransaction& txn, const std::vector<std::string>& groups,
                       BatchStats* stats) const;

  bool stable() const { return config().layout == ProjectionConfig::BucketLayout::kStable; }

  const Relation& relation_;
  PackedLayout packed_;
  StableLayout stable_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_BUCKETS_BUCKET_PROJECTION_H_
