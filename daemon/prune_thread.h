// PruneThread: `denormd run`'s retention (StoreAdministration::Prune, what
// `denormd prune` does) on a thread and a connection of its own, so that a
// prune never holds up the batches. A prune reads `entities`, `locks` and
// `ref_counts` through in chunks: on the benchmark's soak store it took 3.6 to
// 12.7 s, growing with the tombstones, and while it ran between two batches
// (as it did) no event was applied: the freshness p99 around each prune
// peaked at 10 to 30 s (docs/benchmarks.md, "Soak").
//
// Pruning beside the batches is what it already is beside other instances:
// each chunk is a short transaction that skips the rows a batch holds, and a
// batch that needs a lock row a chunk is removing waits for the chunk and
// creates the row again (PostgresStore::kLockRowsPerChunk;
// PostgresWriteLocks::LockKeys).
//
// Tombstones are swept once an hour (kTombstoneSweepInterval), the rest every
// retention.interval_s.
//
// One owner thread calls StartIfDue and Stop; the prune itself only logs.
#ifndef DENORMD_DAEMON_PRUNE_THREAD_H_
#define DENORMD_DAEMON_PRUNE_THREAD_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>

#include "config/config.h"
#include "projections/store_admin.h"

namespace denormd {

// Rows one prune transaction removes at most (`run` and `denormd prune`).
constexpr size_t kPruneChunkRows = 10000;

// How often `run` sweeps tombstones: at most once an hour, whatever
// retention.interval_s says of the rest. The sweep reads all of `entities`
// (no index on age: one would cost every update of an entity its HOT
// update), which the soak's store grew to 1.5 million rows in half an hour
// and the prune to 20 s every 5 minutes; the horizon is counted in hours.
constexpr std::chrono::hours kTombstoneSweepInterval{1};

// What the prune starting at `now` does: `retention`, without the tombstone
// sweep (tombstone_hours 0) when the last one started (`last_sweep`; the
// epoch of steady_clock: never) less than kTombstoneSweepInterval ago.
RetentionConfig RetentionForPruneAt(const RetentionConfig& retention,
                                    std::chrono::steady_clock::time_point last_sweep,
                                    std::chrono::steady_clock::time_point now);

class PruneThread {
 public:
  // Borrows `config` (its store section), which must outlive this; each
  // prune runs on a store of its own that `stores` makes (its own
  // connection, closed at the end).
  PruneThread(const Config& config, StoreFactory stores);
  ~PruneThread();  // Stop()
  PruneThread(const PruneThread&) = delete;
  PruneThread& operator=(const PruneThread&) = delete;

  // Starts a prune with `retention` when none runs and retention.interval_s
  // (0: never) has passed since the last one ended, or since this was made
  // (the first prune is one interval in).
  void StartIfDue(const RetentionConfig& retention);

  // Asks a running prune to end after its current chunk (what it removed is
  // kept) and waits for it.
  void Stop();

 private:
  void Prune(RetentionConfig retention);

  const Config& config_;
  const StoreFactory stores_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<bool> stop_{false};
  // When the last prune ended (written by its thread before running_ goes
  // false; read by the owner only while running_ is false).
  std::chrono::steady_clock::time_point last_end_ = std::chrono::steady_clock::now();
  // When the last prune that swept tombstones started (the owner's).
  std::chrono::steady_clock::time_point last_tombstone_sweep_{};
};

}  // namespace denormd

#endif  // DENORMD_DAEMON_PRUNE_THREAD_H_
