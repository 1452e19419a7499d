// BatchApplier: applies a batch of events to a Store in one transaction.
//
// A batch commits all of its effects together or none of them: the source
// rows (with the version check), every affected document, the dead letters
// and the stream positions reached. Documents are recomputed from the source
// state rather than patched with deltas, so applying is idempotent and the
// result does not depend on how events are split into batches.
//
// Concurrency (several daemon instances on one database) is made safe by
// locks, in two phases; see the comment at BatchApplier::Apply in the .cc.
//
// Thread-compatible: const methods may run concurrently on different stores.
#ifndef DENORMD_PROJECTIONS_BATCH_APPLIER_H_
#define DENORMD_PROJECTIONS_BATCH_APPLIER_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "projections/document_builder.h"
#include "projections/event.h"
#include "projections/projection_plan.h"
#include "projections/store.h"

namespace denormd {

// A batch after decoding: valid events in stream order, the bad ones as dead
// letters, and the last position of every stream the batch covers.
struct DecodedBatch {
  struct Item {
    SourcePosition at;
    EntityEvent event;
  };
  std::vector<Item> events;
  std::vector<DeadLetter> dead_letters;
  std::vector<SourcePosition> last_positions;  // one per (source, partition)
  // Optional fencing: the stored position each stream is expected to have
  // before this batch (-1 = none). Streams not listed are not checked.
  std::vector<SourcePosition> previous_positions;
  size_t raw_count = 0;
};

// Decodes raw events; never fails (bad events become dead letters).
DecodedBatch DecodeBatch(const Config& config, const std::vector<RawEvent>& raw);

struct BatchStats {
  uint64_t events = 0;              // raw events in the batch
  uint64_t applied = 0;             // events that changed or confirmed source state
  uint64_t stale = 0;               // skipped: version not newer than stored
  uint64_t dead_letters = 0;
  uint64_t entities_written = 0;
  uint64_t units_recomputed = 0;    // documents (or bucket groups) recomputed
  uint64_t documents_written = 0;   // rows inserted or changed
  uint64_t documents_deleted = 0;
  uint64_t busy_retries = 0;        // attempts rolled back because a lock was busy
  // Bucket groups whose changed tail was spliced from the stored buckets, and
  // those rendered from every member's entity because the stored buckets did
  // not fit (edited documents, or a `select` changed without a rebuild).
  uint64_t tails_spliced = 0;
  uint64_t tails_rendered = 0;

  void Add(const BatchStats& other);
};

// Units to recompute: projection index -> root ids (entity projections) or
// group values (bucket projections).
using UnitSet = std::map<size_t, std::set<std::string>>;
// For bucket units changed by a batch: projection -> group -> bound. A group
// with a bound is recomputed from the bucket holding the bound on.
using BucketBounds = std::map<size_t, std::map<std::string, BucketBound>>;

class BatchApplier {
 public:
  explicit BatchApplier(const ProjectionPlan& plan, uint64_t tail_page_rows = 2000)
      : plan_(plan), builder_(plan, tail_page_rows) {}

  // Applies `batch` in one new transaction of `store` and commits, retrying
  // internally when another writer holds a lock it needs (see the .cc). On
  // error nothing is committed; Transient errors may be retried by the caller
  // with the same batch.
  Status Apply(Store* store, const DecodedBatch& batch, BatchStats* stats) const;

  // Recomputes `units` inside `txn` and writes the documents that differ;
  // deletes the documents of units that no longer exist. Used by Apply and
  // by rebuild. Locks nothing: the caller holds what it needs.
  Status RecomputeUnits(StoreTransaction* txn, const UnitSet& units, BatchStats* stats,
                        const BucketBounds* bounds = nullptr) const;

  // Recomputes `units` and compares with the stored documents without
  // writing. Appends a line per difference to `differences`.
  Status VerifyUnits(StoreTransaction* txn, const UnitSet& units,
                     std::vector<std::string>* differences) const;

 private:
  Status ApplyInTransaction(StoreTransaction* txn, const DecodedBatch& batch, bool exclusive,
                            BatchStats* stats) const;

  Status RecomputeBucketTails(StoreTransaction* txn, size_t projection,
                              const std::map<std::string, BucketBound>& bounds,
                              BatchStats* stats) const;

  const ProjectionPlan& plan_;
  DocumentBuilder builder_;
};

// Lock keys (opaque strings) of an entity and of a bucket group.
std::string EntityLockKey(const std::string& type, const std::string& id);
std::string GroupLockKey(const std::string& projection, const std::string& group);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_BATCH_APPLIER_H_
