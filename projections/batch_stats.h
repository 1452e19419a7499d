// BatchStats: what applying a batch (or a rebuild page) did, counted.
#ifndef DENORMD_PROJECTIONS_BATCH_STATS_H_
#define DENORMD_PROJECTIONS_BATCH_STATS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace denormd {

// What one change of an entity cost: the documents it made the batch
// recompute (its own, its parents', and those found through the index that
// read it), counted for it alone; documents two changes of a batch share
// count for both.
struct EventFanOut {
  std::string type;
  std::string id;
  // The top-level fields it changed, ascending; or "(created)" or
  // "(deleted)".
  std::vector<std::string> fields;
  uint64_t documents = 0;
};

struct BatchStats {
  uint64_t events = 0;              // raw records in the batch
  uint64_t applied = 0;             // events that changed or confirmed source state
  uint64_t stale = 0;               // skipped: version not newer than stored
  uint64_t dead_letters = 0;
  uint64_t skipped = 0;             // records that carry no change (e.g. tombstones)
  uint64_t entities_written = 0;
  uint64_t units_recomputed = 0;    // documents (or bucket groups) recomputed
  uint64_t documents_written = 0;   // rows inserted or changed
  uint64_t documents_deleted = 0;
  uint64_t busy_retries = 0;        // attempts rolled back because a lock was busy
  double busy_seconds = 0;          // the wall time of those attempts
  uint64_t round_trips = 0;         // to the store server, all attempts
  uint64_t statements = 0;          // SQL statements sent, all attempts (>= round_trips)
  // Bucket groups whose changed buckets were spliced from the stored ones,
  // and those rendered from every member's entity because the stored buckets
  // did not fit (edited documents, or a `select` changed without a rebuild).
  uint64_t tails_spliced = 0;
  uint64_t tails_rendered = 0;
  // The changes with what each cost: BatchApplier::Apply appends every
  // change of its batch; Add (summing batches) keeps the kTopFanOuts largest.
  static constexpr size_t kTopFanOuts = 10;
  std::vector<EventFanOut> fanouts;

  void Add(const BatchStats& o) {
    fanouts.insert(fanouts.end(), o.fanouts.begin(), o.fanouts.end());
    std::sort(fanouts.begin(), fanouts.end(), [](const EventFanOut& a, const EventFanOut& b) {
      return a.documents > b.documents;
    });
    if (fanouts.size() > kTopFanOuts) fanouts.resize(kTopFanOuts);
    events += o.events;
    applied += o.applied;
    stale += o.stale;
    dead_letters += o.dead_letters;
    skipped += o.skipped;
    entities_written += o.entities_written;
    units_recomputed += o.units_recomputed;
    documents_written += o.documents_written;
    documents_deleted += o.documents_deleted;
    busy_retries += o.busy_retries;
    busy_seconds += o.busy_seconds;
    round_trips += o.round_trips;
    statements += o.statements;
    tails_spliced += o.tails_spliced;
    tails_rendered += o.tails_rendered;
  }
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_BATCH_STATS_H_
