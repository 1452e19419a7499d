// Replay: applies JSON Lines event logs through the transactional batch path
// (the BatchLoop with an EventLogSource).
//
// Each log is a stream of its own; its position (the last applied line) is
// committed with every batch, so a replay that is interrupted at any point
// (kill -9 included) and run again resumes exactly after the last committed
// batch. Logs read from stdin are not resumed.
#ifndef DENORMD_DAEMON_REPLAY_H_
#define DENORMD_DAEMON_REPLAY_H_

#include <functional>
#include <string>

#include "formats/decoder.h"
#include "projections/batch_applier.h"
#include "projections/store.h"

namespace denormd {

struct ReplayOptions {
  size_t batch_size = 5000;    // events per transaction, >= 1
  int max_attempts = 10;       // tries per batch on transient errors
  uint64_t max_event_bytes = 1 << 20;  // batch.max_event_bytes
  // Called after each committed batch (for progress output); may be empty.
  std::function<void(const std::string& source, const BatchStats& total, uint64_t bytes_read,
                      uint64_t bytes_total)>
      on_batch;
  // Called before each retry of a batch after a transient error; may be empty.
  std::function<void(const Status& error, int attempt)> on_retry;
  // A change that makes a batch recompute more documents than this is
  // logged (`fanout_large`, limits.fanout_warn); what changes cost is kept in
  // the store's statistics (daemon/fanout_recorder.h).
  uint64_t fanout_warn = 1000;
};

struct ReplayReport {
  std::string source;
  int64_t resumed_after_line = 0;  // 0: started from the beginning
  int64_t last_line = 0;
  uint64_t batches = 0;
  BatchStats stats;
};

// Replays one log in `decoder`'s format. Returns the first non-transient
// error, or a transient one that persisted through all attempts; everything
// committed before stays.
Status ReplayLog(const Decoder& decoder, const BatchApplier& applier, Store* store,
                 const std::string& path, const ReplayOptions& options, ReplayReport* report);

}  // namespace denormd

#endif  // DENORMD_DAEMON_REPLAY_H_
