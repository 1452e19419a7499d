// BatchApplier: applies a batch of events to a Store in one transaction.
//
// A batch commits all of its effects together or none of them: the source
// rows (with the version check), every affected document, the dead letters
// and the stream positions reached. Documents are recomputed from the source
// state rather than patched with deltas, so applying is idempotent and the
// result does not depend on how events are split into batches.
//
// One batch, in order (each a step of ApplyInTransaction):
//   1. lock and load the entities the batch changes (phase 1 locks);
//   2. apply the events in order to those states, in memory (version check,
//      upsert, merge patch, tombstones);
//   3. write the source rows that changed, with their reference-index rows;
//   4. collect the affected units from the changes, through the plan (each
//      projection and derivation says what a change affects);
//   5. lock those units and the lookup targets named (phase 2 locks);
//   6. recompute them (Projection::Recompute);
//   7. record dead letters and stream positions.
//
// Concurrency (several daemon instances on one database) is made safe by the
// two lock phases; the argument is at BatchApplier::Apply in the .cc.
//
// Thread-compatible: const methods may run concurrently on different stores.
#ifndef DENORMD_PROJECTIONS_BATCH_APPLIER_H_
#define DENORMD_PROJECTIONS_BATCH_APPLIER_H_

#include <map>
#include <string>
#include <vector>

#include "projections/affected.h"
#include "projections/limits.h"
#include "projections/batch_stats.h"
#include "projections/projection_plan.h"
#include "projections/store.h"
#include "projections/stream.h"

namespace denormd {

class BatchApplier {
 public:
  explicit BatchApplier(const ProjectionPlan& plan);

  // Applies `batch` in one new transaction of `store` and commits, retrying
  // internally when another writer holds a lock it needs (see the .cc). On
  // error nothing is committed; Transient errors may be retried by the caller
  // with the same batch; Conflict means another consumer moved a fenced
  // stream (re-read the positions).
  Status Apply(Store* store, const EventBatch& batch, BatchStats* stats) const;

  // Recomputes, in `txn`, every unit that `changes` (source changes another
  // transaction already wrote) affect, without locks or positions: how
  // `denormd apply` brings the tables it builds up to date with the batches
  // that ran meanwhile (the caller makes sure nothing else writes them).
  Status Refresh(StoreTransaction& txn, const std::vector<EntityChange>& changes,
                 BatchStats* stats) const;

  const ProjectionPlan& plan() const { return plan_; }

 private:
  // Every entity the batch touches: (before, after).
  using EntityStates = std::map<EntityKey, std::pair<EntityState, EntityState>>;
  // Per stream (source + partition): what the batch records.
  using Streams = std::map<std::string, PositionUpdate>;

  Status ApplyInTransaction(StoreTransaction& txn, const EventBatch& batch, bool exclusive,
                            BatchStats* stats) const;
  // The parts of the model (PartOfType) the events of `batch` are in: where
  // all its lock keys lie.
  std::vector<std::string> PartsOf(const EventBatch& batch) const;
  Status LockAndLoad(StoreTransaction& txn, const EventBatch& batch, EntityStates* states) const;
  // Applies the events in order; an event whose new state the store could
  // not index (IndexLimitsError) is refused into *refused instead.
  void ApplyEvents(const EventBatch& batch, EntityStates* states, Streams* streams,
                   std::vector<DeadLetter>* refused, BatchStats* stats) const;
  // Why the store could not hold the index rows of `state`; ok when it can.
  Status IndexLimitsError(const EntityState& state) const;
  Status WriteSource(StoreTransaction& txn, const EntityStates& states,
                     std::vector<EntityChange>* changes, BatchStats* stats) const;
  // The units `changes` affect, and with `fanouts`, what each change costs
  // alone (appended, in the order of `changes`).
  Status CollectAffected(StoreTransaction& txn, const std::vector<EntityChange>& changes,
                         AffectedUnits* affected, std::vector<EventFanOut>* fanouts) const;
  Status LockAffected(StoreTransaction& txn, const AffectedUnits& affected, bool exclusive) const;
  // `batch_moves`: the changes are one batch's own (AffectedUnits::moves
  // holds what they moved).
  Status Recompute(StoreTransaction& txn, const AffectedUnits& affected, bool batch_moves,
                   BatchStats* stats) const;
  Status RecordStreams(StoreTransaction& txn, const EventBatch& batch,
                       const std::vector<DeadLetter>& refused, Streams* streams) const;

  const ProjectionPlan& plan_;
  const std::map<std::string, std::string> part_of_;  // PartOfType(plan_)
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_BATCH_APPLIER_H_
