#include "daemon/prune_thread.h"

#include <chrono>
#include <utility>

#include "common/log.h"

namespace denormd {

RetentionConfig RetentionForPruneAt(const RetentionConfig& retention,
                                    std::chrono::steady_clock::time_point last_sweep,
                                    std::chrono::steady_clock::time_point now) {
  RetentionConfig out = retention;
  if (last_sweep != std::chrono::steady_clock::time_point() &&
      now - last_sweep < kTombstoneSweepInterval) {
    out.tombstone_hours = 0;
  }
  return out;
}

PruneThread::PruneThread(const Config& config, StoreFactory stores)
    : config_(config), stores_(std::move(stores)) {}

PruneThread::~PruneThread() { Stop(); }

void PruneThread::StartIfDue(const RetentionConfig& retention) {
  if (retention.interval_s == 0 || running_.load() || stop_.load()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_end_ < std::chrono::seconds(retention.interval_s)) return;
  if (thread_.joinable()) thread_.join();  // the last prune's, ended
  RetentionConfig this_prune = RetentionForPruneAt(retention, last_tombstone_sweep_, now);
  if (this_prune.tombstone_hours > 0) last_tombstone_sweep_ = now;
  running_.store(true);
  thread_ = std::thread([this, this_prune] { Prune(this_prune); });
}

void PruneThread::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void PruneThread::Prune(RetentionConfig retention) {
  const auto start = std::chrono::steady_clock::now();
  PruneReport report;
  Status status;
  {
    const std::unique_ptr<StoreAdministration> store = stores_(config_);
    status = store->Prune(retention, kPruneChunkRows, &report, nullptr,
                          [this] { return stop_.load(); });
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!status.ok()) {
    Log(LogLevel::kWarn, "prune_failed",
        {{"error", status.message()}, {"rows_removed", report.total()},
         {"next_in_s", retention.interval_s}});
  } else {
    if (report.stale_apply_cleared) {
      Log(LogLevel::kWarn, "stale_apply_cleared",
          {{"journal_rows", report.stale_journal_rows},
           {"note", "an interrupted apply's mark, journal and __next tables were removed"}});
    }
    Log(report.total() > 0 ? LogLevel::kInfo : LogLevel::kDebug, "pruned",
        {{"tombstones", report.tombstones}, {"dead_letters", report.dead_letters},
         {"lock_rows", report.lock_rows}, {"zero_counts", report.zero_counts},
         {"ms", seconds * 1000}});
  }
  last_end_ = std::chrono::steady_clock::now();
  running_.store(false);
}

}  // namespace denormd
