#include "daemon/replay.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/log.h"
#include "connectors/event_log.h"

namespace denormd {

namespace {

Status LoadResumeLine(Store* store, const std::string& source, int64_t* line) {
  *line = 0;
  std::unique_ptr<StoreTransaction> txn;
  DENORMD_RETURN_IF_ERROR(store->Begin(&txn));
  std::vector<StoredPosition> positions;
  DENORMD_RETURN_IF_ERROR(txn->LoadPositions(source, &positions));
  for (const StoredPosition& position : positions) {
    if (position.at.partition == 0) *line = position.at.position;
  }
  return Status::Ok();
}

}  // namespace

Status ReplayLog(const Config& config, const BatchApplier& applier, Store* store,
                 const std::string& path, const ReplayOptions& options, ReplayReport* report) {
  EventLogReader reader;
  DENORMD_RETURN_IF_ERROR(reader.Open(path));
  report->source = reader.source();
  if (path != "-") {
    DENORMD_RETURN_IF_ERROR(LoadResumeLine(store, reader.source(), &report->resumed_after_line));
    DENORMD_RETURN_IF_ERROR(reader.SkipTo(report->resumed_after_line));
  }
  report->last_line = report->resumed_after_line;
  size_t batch_size = options.batch_size == 0 ? 1 : options.batch_size;
  bool eof = false;
  while (!eof) {
    std::vector<RawEvent> raw;
    DENORMD_RETURN_IF_ERROR(reader.Read(batch_size, &raw, &eof));
    if (raw.empty()) break;
    DecodedBatch batch = DecodeBatch(config, raw);
    if (path != "-") {
      batch.previous_positions.push_back(
          {reader.source(), 0, report->last_line == 0 ? -1 : report->last_line});
    }
    BatchStats stats;
    Status status;
    for (int attempt = 1;; ++attempt) {
      stats = BatchStats();
      status = applier.Apply(store, batch, &stats);
      if (status.ok() || !status.IsTransient() || attempt >= options.max_attempts) break;
      if (options.on_retry) options.on_retry(status, attempt);
      std::this_thread::sleep_for(std::chrono::milliseconds(RetryBackoffMs(attempt)));
    }
    DENORMD_RETURN_IF_ERROR(status);
    WarnIfTailsRendered(stats);
    report->stats.Add(stats);
    report->batches++;
    report->last_line = raw.back().at.position;
    if (options.on_batch) {
      options.on_batch(reader.source(), report->stats, reader.bytes_read(), reader.size());
    }
  }
  return Status::Ok();
}

int RetryBackoffMs(int attempt) { return std::min(5000, 100 << std::min(attempt, 6)); }

void WarnIfTailsRendered(const BatchStats& stats) {
  if (stats.tails_rendered == 0) return;
  Log(LogLevel::kWarn, "bucket_tails_rendered",
      {{"groups", stats.tails_rendered},
       {"reason", "stored buckets did not match their members (edited, or select changed "
                  "without rebuild); rendered from the entities, exact; run denormd verify"}});
}

}  // namespace denormd
