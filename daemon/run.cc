#include "daemon/run.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "common/process.h"
#include "common/retry.h"
#include "connectors/kafka_source.h"
#include "daemon/batch_loop.h"
#include "daemon/cli.h"
#include "daemon/engine.h"
#include "daemon/http_server.h"
#include "daemon/metrics.h"

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
  Daemon(Config config, const RunOptions& options)
      : options_(options),
        engine_(std::move(config), options.postgres),
        source_(engine_.config, LoadPositionsFrom(engine_.store), &g_stop),
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
    Status opened = OpenStoreWithRetry();
    if (!opened.ok()) {
      std::cerr << "denormd run: " << opened.message() << "\n";
      return Shutdown(kExitUsage);
    }
    if (g_stop.load()) return Shutdown(kExitOk);
    Status status = source_.Open();
    if (!status.ok()) {
      std::cerr << "denormd run: " << status.message() << "\n";
      return Shutdown(status.IsInvalidInput() ? kExitUsage : kExitFailure);
    }
    const Config& config = engine_.config;
    Log(LogLevel::kInfo, "daemon_started",
        {{"schema", config.store.schema},
         {"batch_max_events", config.batch.max_events},
         {"batch_max_delay_ms", config.batch.max_delay_ms},
         {"metrics_port", http_.port()}});
    return Shutdown(Loop());
  }

 private:
  // The store must be reachable before anything is consumed; an outage at
  // start-up is waited out like one at run time. Only a store that can never
  // be used with this config (its index needs a rebuild) is an error.
  Status OpenStoreWithRetry() {
    for (int attempt = 1; !g_stop.load(); ++attempt) {
      Status status = engine_.store.Open();
      if (status.IsInvalidInput()) return status;  // waiting will not help
      if (status.ok()) {
        health_.Set(true, "ok");
        metrics_.SetStoreHealthy(true);
        return Status::Ok();
      }
      health_.Set(false, "store unavailable: " + status.message());
      Log(LogLevel::kWarn, "store_unavailable", {{"attempt", attempt}, {"error", status.message()}});
      SleepUnlessStopping(RetryBackoffMs(attempt));
    }
    return Status::Ok();
  }

  int Loop() {
    const Config& config = engine_.config;
    BatchLoopOptions options;
    options.max_events = config.batch.max_events;
    options.max_delay_ms = static_cast<int>(config.batch.max_delay_ms);
    BatchLoopHooks hooks;
    hooks.after_poll = [this] { UpdateLag(); };
    hooks.on_commit = [this](const std::vector<RawRecord>& records, const BatchStats& stats,
                             double seconds, int /*attempts*/) { OnCommit(records, stats, seconds); };
    hooks.on_retry = [this](const Status& error, int /*attempt*/) {
      metrics_.AddRetry();
      health_.Set(false, "store unavailable: " + error.message());
      metrics_.SetStoreHealthy(false);
    };
    BatchLoop loop(source_, engine_.decoder, engine_.applier, engine_.store, &source_, options,
                   std::move(hooks), g_stop);
    window_start_ = std::chrono::steady_clock::now();
    Status status = loop.Run();
    if (status.ok()) return kExitOk;
    Log(LogLevel::kError, "batch_failed", {{"error", status.message()}});
    return kExitFailure;
  }

  void OnCommit(const std::vector<RawRecord>& records, const BatchStats& stats, double seconds) {
    metrics_.AddBatch(stats.applied, stats.stale, stats.dead_letters, stats.documents_written,
                      stats.documents_deleted, seconds, stats.skipped);
    const double now = UnixSeconds();
    metrics_.SetLastCommitTimestamp(now);
    std::vector<double> ages;
    for (const RawRecord& record : records) {
      if (record.timestamp_ms > 0) ages.push_back(now - record.timestamp_ms / 1000.0);
    }
    metrics_.ObserveEventAges(ages);
    health_.Set(true, "ok");
    metrics_.SetStoreHealthy(true);
    Log(LogLevel::kDebug, "batch_committed",
        {{"events", stats.events}, {"applied", stats.applied}, {"stale", stats.stale},
         {"dead_letters", stats.dead_letters}, {"skipped", stats.skipped},
         {"documents_written", stats.documents_written},
         {"ms", seconds * 1000}});
    total_events_ += records.size();
    window_events_ += records.size();
    const double window =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start_).count();
    if (window >= 10) {
      int64_t lag = 0;
      for (const auto& entry : source_.Lag()) lag += entry.second;
      Log(LogLevel::kInfo, "progress",
          {{"events", total_events_}, {"events_per_s", window_events_ / window}, {"lag", lag}});
      window_events_ = 0;
      window_start_ = std::chrono::steady_clock::now();
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

  const RunOptions& options_;
  Engine engine_;
  Metrics metrics_;
  Health health_;
  KafkaEventSource source_;
  MetricsHttpServer http_;
  std::chrono::steady_clock::time_point last_lag_update_;
  std::chrono::steady_clock::time_point window_start_;
  uint64_t total_events_ = 0;
  uint64_t window_events_ = 0;
};

}  // namespace

int RunDaemon(Config config, const RunOptions& options) {
  g_stop.store(false);
  Daemon daemon(std::move(config), options);
  return daemon.Run();
}

}  // namespace denormd
