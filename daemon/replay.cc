#include "daemon/replay.h"

#include <atomic>

#include "common/log.h"
#include "connectors/event_log_source.h"
#include "daemon/batch_loop.h"
#include "daemon/fanout_recorder.h"

namespace denormd {

Status ReplayLog(const Decoder& decoder, const BatchApplier& applier, Store* store,
                 const std::string& path, const ReplayOptions& options, ReplayReport* report) {
  EventLogSource log;
  DENORMD_RETURN_IF_ERROR(log.Open(path, LoadPositionsFrom(*store),
                                   Lanes::Single(applier.plan().config()),
                                   options.max_event_bytes));
  report->source = log.source();
  report->resumed_after_line = log.resumed_after_line();
  report->last_line = log.resumed_after_line();
  BatchLoopOptions loop_options;
  loop_options.max_events = options.batch_size;
  loop_options.max_attempts = options.max_attempts;
  BatchLoopHooks hooks;
  FanOutRecorder fanouts;
  hooks.on_commit = [&](const CommittedBatch& batch) {
    fanouts.Observe(batch.stats.fanouts, options.fanout_warn);
    report->stats.Add(batch.stats);
    report->batches++;
    report->last_line = batch.records.back().at.position;
    if (options.on_batch) {
      options.on_batch(log.source(), report->stats, log.bytes_read(), log.size());
    }
  };
  hooks.on_retry = options.on_retry;
  const std::atomic<bool> never_stop{false};
  BatchLoop loop(log, decoder, applier, *store, nullptr, loop_options, std::move(hooks),
                 never_stop);
  Status status = loop.Run();
  // Statistics: a failure to keep them does not fail the replay.
  Status kept = fanouts.Flush(store, /*force=*/true);
  if (!kept.ok()) Log(LogLevel::kWarn, "fanout_stats_not_kept", {{"error", kept.message()}});
  return status;
}

}  // namespace denormd
