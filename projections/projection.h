// Projection: one configured projection, as the engine keeps it. Two kinds:
//   EntityProjection (projections/entity_projection.h)  from: T, one document
//       per live entity, its fields computed by derivations;
//   BucketProjection (projections/buckets/)             buckets: T, a group's
//       members in documents of `size`.
// The BatchApplier and rebuild/verify see only this interface.
//
// Immutable after the plan built it; safe to use from several threads.
#ifndef DENORMD_PROJECTIONS_PROJECTION_H_
#define DENORMD_PROJECTIONS_PROJECTION_H_

#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "projections/affected.h"
#include "projections/batch_stats.h"
#include "projections/entity.h"
#include "projections/source_view.h"
#include "projections/store.h"

namespace denormd {

class Projection {
 public:
  Projection(const ProjectionConfig& config, size_t index) : config_(config), index_(index) {}
  virtual ~Projection() = default;
  Projection(const Projection&) = delete;
  Projection& operator=(const Projection&) = delete;

  const ProjectionConfig& config() const { return config_; }
  // Its index in Config::projections (and in AffectedUnits).
  size_t index() const { return index_; }

  // The entity type whose changes name this projection's units directly:
  // the root type (from: T) or the member type (buckets: T).
  virtual const std::string& unit_type() const = 0;

  // Adds the units a change of a unit_type() entity affects.
  virtual void CollectAffected(const EntityChange& change, AffectedUnits* out) const = 0;

  // The lock taken before a unit is recomputed.
  virtual std::string LockKey(const std::string& unit) const = 0;

  // Tells the store what Recompute of `units` (with `changes`, as
  // Recompute gets them) in a batch will read (SourceRows::ReadAhead and the
  // like: hints, which change no answer), so that a store that queues
  // statements reads it all in one round trip instead of one per read.
  // Nothing by default.
  virtual void ReadAhead(StoreTransaction& txn, const std::set<std::string>& units,
                         const GroupChanges* changes) const {
    (void)txn;
    (void)units;
    (void)changes;
  }

  // Recomputes `units` from the source, writes the documents that differ and
  // deletes those of units that are gone. `changes` (bucket projections
  // only) holds the member changes of the groups a batch changed; without
  // them a group is rendered whole (rebuild). `moves` (entity projections)
  // holds the referrers the batch's own changes moved (Derivation::
  // ReadInBatch); null outside a batch, when every referrer is read.
  virtual Status Recompute(StoreTransaction& txn, const std::set<std::string>& units,
                           const GroupChanges* changes, const RelationMoves* moves,
                           BatchStats* stats) const = 0;

  // Verify: recomputes `units` by the projection's definition from the
  // source alone (`source`: never the reference index, its counters, the
  // plan's relations or anything else a batch maintains), compares with
  // the stored documents and their columns without writing, and appends one
  // line per difference.
  virtual Status VerifyFromSource(StoreTransaction& txn, SourceView& source,
                                  const std::vector<std::string>& units,
                                  std::vector<std::string>* differences) const = 0;
  // Verify's list of the units the source defines (live roots; groups with
  // members), ascending, found through `source` alone.
  virtual Status ListDefinedUnits(StoreTransaction& txn, SourceView& source,
                                  std::vector<std::string>* out) const = 0;

  // The units the source has (live roots; groups with members) and the units
  // the stored documents belong to, ascending, greater than `after`, at most
  // `limit`: rebuild and verify walk both.
  virtual Status ListSourceUnits(StoreTransaction& txn, const std::string& after, size_t limit,
                                 std::vector<std::string>* out) const = 0;
  virtual Status ListStoredUnits(StoreTransaction& txn, const std::string& after, size_t limit,
                                 std::vector<std::string>* out) const = 0;

 protected:
  // Compares the documents built for some units with those stored for them;
  // one line per missing, unexpected or differing document (its JSON, its
  // partition key, and for a packed bucket its columns: number, seq and
  // members; a stable bucket's are StableLayout::CheckGroup's).
  void CompareDocuments(std::vector<DocumentRow> expected, const std::vector<DocumentRow>& stored,
                        std::vector<std::string>* differences) const;

 private:
  const ProjectionConfig& config_;
  const size_t index_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_PROJECTION_H_
