#include "daemon/replay.h"

#include <atomic>

#include "connectors/event_log_source.h"
#include "daemon/batch_loop.h"

namespace denormd {

Status ReplayLog(const Decoder& decoder, const BatchApplier& applier, Store* store,
                 const std::string& path, const ReplayOptions& options, ReplayReport* report) {
  EventLogSource log;
  DENORMD_RETURN_IF_ERROR(log.Open(path, LoadPositionsFrom(*store)));
  report->source = log.source();
  report->resumed_after_line = log.resumed_after_line();
  report->last_line = log.resumed_after_line();
  BatchLoopOptions loop_options;
  loop_options.max_events = options.batch_size;
  loop_options.max_attempts = options.max_attempts;
  BatchLoopHooks hooks;
  hooks.on_commit = [&](const std::vector<RawRecord>& records, const BatchStats& stats,
                        double /*seconds*/, int /*attempts*/) {
    report->stats.Add(stats);
    report->batches++;
    report->last_line = records.back().at.position;
    if (options.on_batch) {
      options.on_batch(log.source(), report->stats, log.bytes_read(), log.size());
    }
  };
  hooks.on_retry = options.on_retry;
  const std::atomic<bool> never_stop{false};
  BatchLoop loop(log, decoder, applier, *store, nullptr, loop_options, std::move(hooks),
                 never_stop);
  return loop.Run();
}

}  // namespace denormd
