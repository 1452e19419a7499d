#include "daemon/run.h"

#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "connectors/kafka_source.h"
#include "connectors/postgres_store.h"
#include "daemon/cli.h"
#include "daemon/http_server.h"
#include "daemon/metrics.h"
#include "daemon/replay.h"
#include "projections/batch_applier.h"

namespace denormd {

namespace {

// The signal handler only flips this flag; the loop polls it with bounded
// timeouts, so a stop request is honoured within one poll or one batch.
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};

extern "C" void OnStopSignal(int signal) {
  g_signal.store(signal);
  g_stop.store(true);
}

void InstallSignalHandlers() {
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int64_t PeakRssKib() {
  struct rusage usage = {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Sleeps up to `ms`, waking early on a stop request.
void SleepUnlessStopping(int ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!g_stop.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Health as /healthz reports it: the store answered the last time it was used.
class Health {
 public:
  void Set(bool ok, std::string why) {
    std::lock_guard<std::mutex> lock(mu_);
    ok_ = ok;
    why_ = std::move(why);
  }
  bool Get(std::string* why) const {
    std::lock_guard<std::mutex> lock(mu_);
    *why = why_;
    return ok_;
  }

 private:
  mutable std::mutex mu_;
  bool ok_ = false;
  std::string why_ = "starting";
};

class Daemon {
 public:
  Daemon(const Config& config, const RunOptions& options)
      : config_(config),
        options_(options),
        plan_(config),
        applier_(plan_),
        store_(config, options.postgres),
        source_(config,
                [this](const std::vector<KafkaEventSource::TopicPartition>& partitions,
                       std::map<KafkaEventSource::TopicPartition, int64_t>* out) {
                  return LoadPositions(partitions, out);
                },
                &g_stop),
        http_([this] { return metrics_.Render(); },
              [this](std::string* why) { return health_.Get(why); }) {}

  int Run() {
    InstallSignalHandlers();
    if (options_.metrics_port > 0) {
      Status status = http_.Start(options_.metrics_address, options_.metrics_port);
      if (!status.ok()) {
        std::cerr << "denormd run: " << status.message() << "\n";
        return kExitUsage;
      }
    }
    if (!OpenStoreWithRetry()) return Shutdown(open_error_ ? kExitUsage : kExitOk);
    Status status = source_.Open();
    if (!status.ok()) {
      std::cerr << "denormd run: " << status.message() << "\n";
      return Shutdown(status.IsInvalidInput() ? kExitUsage : kExitFailure);
    }
    Log(LogLevel::kInfo, "daemon_started",
        {{"schema", config_.store.schema},
         {"batch_max_events", config_.batch.max_events},
         {"batch_max_delay_ms", config_.batch.max_delay_ms},
         {"metrics_port", http_.port()}});
    return Shutdown(Loop());
  }

 private:
  // The store must be reachable before anything is consumed; an outage at
  // start-up is waited out like one at run time.
  bool OpenStoreWithRetry() {
    for (int attempt = 1; !g_stop.load(); ++attempt) {
      Status status = store_.Open();
      if (status.IsInvalidInput()) {  // the index needs a rebuild: waiting will not help
        std::cerr << "denormd run: " << status.message() << "\n";
        g_stop.store(true);
        open_error_ = true;
        return false;
      }
      if (status.ok()) {
        health_.Set(true, "ok");
        metrics_.SetStoreHealthy(true);
        return true;
      }
      health_.Set(false, "store unavailable: " + status.message());
      Log(LogLevel::kWarn, "store_unavailable", {{"attempt", attempt}, {"error", status.message()}});
      SleepUnlessStopping(RetryBackoffMs(attempt));
    }
    return false;
  }

  Status LoadPositions(const std::vector<KafkaEventSource::TopicPartition>& partitions,
                       std::map<KafkaEventSource::TopicPartition, int64_t>* out) {
    std::unique_ptr<StoreTransaction> txn;
    DENORMD_RETURN_IF_ERROR(store_.Begin(&txn));
    std::set<std::string> topics;
    for (const auto& tp : partitions) topics.insert(tp.first);
    for (const std::string& topic : topics) {
      std::vector<StoredPosition> stored;
      DENORMD_RETURN_IF_ERROR(txn->LoadPositions(KafkaStreamSource(*config_.kafka, topic), &stored));
      for (const StoredPosition& p : stored) (*out)[{topic, p.at.partition}] = p.at.position;
    }
    return Status::Ok();
  }

  int Loop() {
    const size_t max_events = config_.batch.max_events;
    const int max_delay = static_cast<int>(config_.batch.max_delay_ms);
    uint64_t total_events = 0, window_events = 0;
    auto window_start = std::chrono::steady_clock::now();
    while (!g_stop.load()) {
      std::vector<RawEvent> raw;
      Status status = source_.Poll(max_events, max_delay, /*idle_ms=*/500, &raw);
      if (!status.ok()) {
        Log(LogLevel::kError, "consumer_failed", {{"error", status.message()}});
        return kExitFailure;
      }
      UpdateLag();
      if (raw.empty()) continue;
      DecodedBatch batch = DecodeBatch(config_, raw);
      batch.previous_positions = source_.PreviousPositions();
      int code = ApplyWithRetry(batch, raw);
      if (code >= 0) return code;
      total_events += raw.size();
      window_events += raw.size();
      double window = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                    window_start).count();
      if (window >= 10) {
        int64_t lag = 0;
        for (const auto& entry : source_.Lag()) lag += entry.second;
        Log(LogLevel::kInfo, "progress",
            {{"events", total_events}, {"events_per_s", window_events / window}, {"lag", lag}});
        window_events = 0;
        window_start = std::chrono::steady_clock::now();
      }
    }
    return kExitOk;
  }

  // Applies one batch, retrying transient failures (the store away, a
  // deadlock) with the same batch until it commits or a stop is requested.
  // Returns -1 to continue, or an exit code.
  int ApplyWithRetry(const DecodedBatch& batch, const std::vector<RawEvent>& raw) {
    bool dead_letters_published = false;
    for (int attempt = 1;; ++attempt) {
      Status status;
      if (!dead_letters_published) {
        status = source_.PublishDeadLetters(batch.dead_letters);
        dead_letters_published = status.ok();
      }
      BatchStats stats;
      auto start = std::chrono::steady_clock::now();
      if (status.ok()) status = applier_.Apply(&store_, batch, &stats);
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (status.ok()) {
        source_.MarkCommitted(batch.last_positions);
        metrics_.AddBatch(stats.applied, stats.stale, stats.dead_letters, stats.documents_written,
                          stats.documents_deleted, seconds);
        double now = UnixSeconds();
        metrics_.SetLastCommitTimestamp(now);
        std::vector<double> ages;
        for (const RawEvent& event : raw) {
          if (event.timestamp_ms > 0) ages.push_back(now - event.timestamp_ms / 1000.0);
        }
        metrics_.ObserveEventAges(ages);
        if (attempt > 1) Log(LogLevel::kInfo, "batch_recovered", {{"attempts", attempt}});
        WarnIfTailsRendered(stats);
        health_.Set(true, "ok");
        metrics_.SetStoreHealthy(true);
        Log(LogLevel::kDebug, "batch_committed",
            {{"events", stats.events}, {"applied", stats.applied}, {"stale", stats.stale},
             {"dead_letters", stats.dead_letters}, {"documents_written", stats.documents_written},
             {"ms", seconds * 1000}});
        return -1;
      }
      if (status.IsConflict()) {
        Log(LogLevel::kWarn, "batch_fenced", {{"error", status.message()}});
        Status reseek = source_.Reseek();
        if (!reseek.ok() && !g_stop.load()) {
          Log(LogLevel::kError, "reseek_failed", {{"error", reseek.message()}});
          return kExitFailure;
        }
        return -1;
      }
      if (!status.IsTransient()) {
        Log(LogLevel::kError, "batch_failed",
            {{"error", status.message()}, {"events", static_cast<uint64_t>(batch.raw_count)}});
        return kExitFailure;
      }
      metrics_.AddRetry();
      health_.Set(false, "store unavailable: " + status.message());
      metrics_.SetStoreHealthy(false);
      Log(LogLevel::kWarn, "batch_retry",
          {{"attempt", attempt}, {"error", status.message()},
           {"retry_in_ms", RetryBackoffMs(attempt)}});
      SleepUnlessStopping(RetryBackoffMs(attempt));
      if (g_stop.load()) {
        // Nothing of this batch committed; it is read again after a restart.
        Log(LogLevel::kInfo, "batch_abandoned_for_stop", {{"attempts", attempt}});
        return kExitOk;
      }
    }
  }

  void UpdateLag() {
    auto now = std::chrono::steady_clock::now();
    if (now - last_lag_update_ < std::chrono::seconds(1)) return;
    last_lag_update_ = now;
    metrics_.SetLag(source_.Lag());
  }

  int Shutdown(int code) {
    source_.Close();
    http_.Stop();
    Log(LogLevel::kInfo, "daemon_stopped",
        {{"exit_code", code}, {"signal", g_signal.load()}, {"peak_rss_kib", PeakRssKib()}});
    return code;
  }

  const Config& config_;
  const RunOptions& options_;
  ProjectionPlan plan_;
  BatchApplier applier_;
  PostgresStore store_;
  Metrics metrics_;
  Health health_;
  KafkaEventSource source_;
  MetricsHttpServer http_;
  std::chrono::steady_clock::time_point last_lag_update_;
  bool open_error_ = false;
};

}  // namespace

int RunDaemon(const Config& config, const RunOptions& options) {
  g_stop.store(false);
  Daemon daemon(config, options);
  return daemon.Run();
}

}  // namespace denormd
