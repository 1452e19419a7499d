// FanOutRecorder: what the changes of each batch cost, as `run` and `replay`
// observe it (BatchStats::fanouts): a `fanout_large` warning for a change
// that made a batch recompute more than limits.fanout_warn documents, and
// per entity type and changed field the changes, the documents and the
// largest change, kept in the store per hour (FanOutStat: `denormd status`
// shows the last hour's largest, `denormd advise` the rates) by Flush at most
// once a minute and when the command ends. Statistics of the last minute
// before a crash are lost; they are statistics. Not thread-safe: the batch
// thread's.
#ifndef DENORMD_DAEMON_FANOUT_RECORDER_H_
#define DENORMD_DAEMON_FANOUT_RECORDER_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "projections/batch_stats.h"
#include "projections/store.h"

namespace denormd {

class FanOutRecorder {
 public:
  // Counts `fanouts` (one batch's) and warns of those above `warn_above`.
  void Observe(const std::vector<EventFanOut>& fanouts, uint64_t warn_above);
  // Writes what was counted since the last flush to `store`, when a minute
  // has passed since then or `force`; kept for the next try on failure.
  Status Flush(Store* store, bool force);

 private:
  std::map<std::pair<std::string, std::string>, FanOutStat> pending_;
  std::chrono::steady_clock::time_point last_flush_ = std::chrono::steady_clock::now();
};

}  // namespace denormd

#endif  // DENORMD_DAEMON_FANOUT_RECORDER_H_
