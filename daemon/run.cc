#include "daemon/run.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "common/clock.h"
#include "common/log.h"
#include "common/process.h"
#include "common/retry.h"
#include "connectors/feed_sink_registry.h"
#include "connectors/kafka_source.h"
#include "connectors/postgres_admin.h"
#include "daemon/batch_loop.h"
#include "daemon/cli.h"
#include "daemon/engine.h"
#include "daemon/http_server.h"
#include "daemon/metrics.h"
#include "daemon/prune_thread.h"
#include "daemon/relay.h"
#include "daemon/fanout_recorder.h"
#include "daemon/reload.h"
#include "daemon/service_notifier.h"
#include "formats/format_registry.h"

namespace denormd {

namespace {

// The signal handlers only flip these flags; the loop polls them with
// bounded timeouts, so a stop request is honoured within one poll or one
// batch, and a reload request between two batches.
std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};
std::atomic<int> g_signal{0};

extern "C" void OnStopSignal(int signal) {
  g_signal.store(signal);
  g_stop.store(true);
}

extern "C" void OnReloadSignal(int /*signal*/) { g_reload.store(true); }

void InstallSignalHandlers() {
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  action.sa_handler = OnReloadSignal;
  sigaction(SIGHUP, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

// How much longer than its pause one attempt to open the store may take
// (a connection attempt, store.connect_timeout_s, 10 s by default, then the
// schema statements) before systemd gives up the start.
constexpr int kStartAttemptMarginMs = 60000;

// How long a stop request waits for the batch in hand before the statement it
// is blocked in is cancelled (the batch then rolls back; nothing of it is
// committed, and the next start applies it again).
constexpr int64_t kStopGraceMs = 5000;

// `text` on one line, for a STATUS= value (libpq messages span lines).
std::string OneLine(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n' || c == '\r') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Sleeps up to `ms`, waking early on a stop request; keeps the watchdog fed.
void SleepUnlessStopping(int ms, ServiceNotifier& notifier) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!g_stop.load() && std::chrono::steady_clock::now() < until) {
    notifier.KeepAlive();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// `loader`, feeding the watchdog around every call: while the store is away
// during a partition assignment, the Kafka source calls it again and again
// (after pauses of at most 5 s) from inside a poll.
PositionLoader KeepingAlive(PositionLoader loader, ServiceNotifier* notifier,
                            std::atomic<int64_t>* last_progress_ms) {
  return [loader = std::move(loader), notifier, last_progress_ms](
             const std::string& source, const std::vector<int32_t>& partitions,
             const Lanes& lanes, std::map<int32_t, StreamProgress>* positions) {
    notifier->KeepAlive();
    last_progress_ms->store(SteadyMillis());
    Status status = loader(source, partitions, lanes, positions);
    notifier->KeepAlive();
    last_progress_ms->store(SteadyMillis());
    return status;
  };
}

BatchLoopOptions LoopOptionsFor(const BatchConfig& batch) {
  BatchLoopOptions options;
  options.max_events = batch.max_events;
  options.max_delay_ms = static_cast<int>(batch.max_delay_ms);
  return options;
}

// What /healthz says while PostgreSQL cannot be reached. Deliberately
// generic: the server's error text (host, port, user, database) goes to the
// log only, never to an unauthenticated HTTP client.
const char kStoreUnavailable[] = "store unavailable (the log says why)";

// Health as /healthz reports it: the store answered the last time it was used.
class Health {
 public:
  void Set(bool ok, std::string why) {
    std::lock_guard<std::mutex> lock(mu_);
    ok_ = ok;
    why_ = std::move(why);
  }
  // A stuck batch ("" = none) overrides the store's state while it lasts.
  void SetStuck(std::string why) {
    std::lock_guard<std::mutex> lock(mu_);
    stuck_ = std::move(why);
  }
  bool Get(std::string* why) const {
    std::lock_guard<std::mutex> lock(mu_);
    *why = stuck_.empty() ? why_ : stuck_;
    return ok_ && stuck_.empty();
  }

 private:
  mutable std::mutex mu_;
  std::string stuck_;
  bool ok_ = false;
  std::string why_ = "starting";
};

// What `run` keeps across its pipelines (a new one starts each time `apply`
// fences the old): the counters, and the port serving /metrics and
// /healthz. So the counters only grow for the life of the process, as
// Prometheus expects of a counter, and the port answers throughout the
// restart instead of closing and opening again.
struct DaemonSurface {
  DaemonSurface()
      : http([this] { return metrics.Render(); },
             [this](std::string* why) { return health.Get(why); }) {}
  Metrics metrics;
  Health health;
  MetricsHttpServer http;
};

// Opens the store with `open`, waiting out an unreachable PostgreSQL with
// backoff (each attempt logged, /healthz 503, systemd told to extend the
// start) until it answers or a stop is requested (then Ok, unopened). Only
// a store that can never be used with this config (InvalidInput) is an error.
Status OpenStoreWaiting(const std::function<Status()>& open, Health& health, Metrics& metrics,
                        ServiceNotifier& notifier) {
  for (int attempt = 1; !g_stop.load(); ++attempt) {
    Status status = open();
    // Waiting will not help: a config the store cannot run, or one it no
    // longer runs (the caller loads the store's).
    if (status.IsInvalidInput() || status.IsStaleConfig()) return status;
    if (status.ok()) {
      health.Set(true, "ok");
      metrics.SetStoreHealthy(true);
      return Status::Ok();
    }
    health.Set(false, kStoreUnavailable);
    Log(LogLevel::kWarn, "store_unavailable", {{"attempt", attempt}, {"error", status.message()}});
    const int pause_ms = RetryBackoffMs(attempt);
    notifier.Notify(
        "EXTEND_TIMEOUT_USEC=" + std::to_string((pause_ms + kStartAttemptMarginMs) * 1000LL) +
        "\nSTATUS=waiting for PostgreSQL: attempt " + std::to_string(attempt) + ": " +
        OneLine(status.message()));
    SleepUnlessStopping(pause_ms, notifier);
  }
  return Status::Ok();
}

// Logs why the start failed and tells the service manager; returns `code`.
int StartFailed(ServiceNotifier& notifier, const Status& status, int code) {
  Log(LogLevel::kError, "start_failed", {{"error", status.message()}, {"exit_code", code}});
  notifier.Notify("STATUS=start failed: " + OneLine(status.message()));
  return code;
}

class Daemon {
 public:
  // `surface` outlives the Daemon: the next pipeline gets it too.
  Daemon(Config config, const RunOptions& options, DaemonSurface* surface)
      : options_(options),
        notifier_(ServiceNotifierFromEnvironment()),
        engine_(std::move(config), options.postgres),
        running_(engine_.config),
        lanes_(Lanes::Of(engine_.plan, engine_.config.batch.max_lanes)),
        source_(engine_.config, lanes_,
                KeepingAlive(LoadPositionsFrom(engine_.store), notifier_.get(), &last_progress_ms_),
                &g_stop),
        metrics_(surface->metrics),
        health_(surface->health),
        http_(surface->http) {}

  int Run() {
    InstallSignalHandlers();
    if (options_.metrics_port > 0 && http_.port() == 0) {  // the first pipeline
      Status status = http_.Start(options_.metrics_address, options_.metrics_port);
      if (!status.ok()) return StartFailed(*notifier_, status, kExitUsage);
    }
    // The store must be reachable before anything is consumed; an outage at
    // start-up is waited out like one at run time.
    // With several lanes, a connection each (opened the same way, fenced on
    // the same epoch), all before the daemon says it is ready: the store's
    // own stays the loop thread's (the positions' loader, the fan-out
    // statistics).
    for (size_t lane = 0; lanes_.size() > 1 && lane < lanes_.size(); ++lane) {
      lane_stores_.push_back(PostgresStores(options_.postgres)(engine_.config));
    }
    Status opened = OpenStoreWaiting(
        [this] {
          Status status = engine_.store.Open();
          for (size_t i = 0; status.ok() && i < lane_stores_.size(); ++i) {
            status = lane_stores_[i]->Open();
          }
          return status;
        },
        health_, metrics_, *notifier_);
    if (opened.IsStaleConfig()) {
      // The file's projections are not the ones the store runs (apply
      // changed them, or the file was edited without apply): run the
      // store's.
      Log(LogLevel::kWarn, "config_differs_from_store",
          {{"file", engine_.config.path}, {"error", opened.message()},
           {"running", "the store's projections"}});
      reconfigure_ = true;
      return Shutdown(kExitOk);
    }
    if (!opened.ok()) return Shutdown(StartFailed(*notifier_, opened, kExitUsage));
    if (g_stop.load()) return Shutdown(kExitOk);
    WarnOfStaleApply();
    if (engine_.config.feed && options_.relay) {
      // After the store is open: the outbox exists.
      relay_ = std::make_unique<RelayThread>(engine_.config, options_.postgres,
                                             DefaultFeedSink(), &metrics_);
      relay_->Start();
    }
    Status status = source_.Open();
    if (!status.ok()) {
      const int code = status.IsInvalidInput() ? kExitUsage : kExitFailure;
      return Shutdown(StartFailed(*notifier_, status, code));
    }
    const Config& config = engine_.config;
    Log(LogLevel::kInfo, "daemon_started",
        {{"schema", config.store.schema},
         {"batch_max_events", config.batch.max_events},
         {"batch_max_delay_ms", config.batch.max_delay_ms},
         {"lanes", static_cast<uint64_t>(lanes_.size())},
         {"metrics_port", http_.port()},
         {"feed_relay", relay_ ? "on" : config.feed ? "off (--no-relay)" : "no feed"}});
    // Ready: the store is open and the consumer subscribed. Partitions are
    // assigned by the group in the first polls.
    notifier_->Notify("READY=1\nSTATUS=" + ConsumingStatus());
    return Shutdown(Loop());
  }

 private:
  int Loop() {
    BatchLoopHooks hooks;
    hooks.alive = [this] {
      notifier_->KeepAlive();
      last_progress_ms_.store(SteadyMillis());
      if (g_stop.load()) NoteStopping("stopping: finishing the batch in hand");
    };
    hooks.after_poll = [this] {
      UpdateLag();
      if (g_reload.exchange(false)) Reload();
      PruneWhenDue();
      KeepFanOuts(/*force=*/false);
    };
    hooks.on_commit = [this](const CommittedBatch& batch) {
      OnCommit(batch);
      if (batch.attempts > 1) notifier_->Notify("STATUS=" + ConsumingStatus());
    };
    hooks.on_retry = [this](const Status& error, int attempt) {
      metrics_.AddRetry();
      health_.Set(false, kStoreUnavailable);
      metrics_.SetStoreHealthy(false);
      notifier_->Notify("STATUS=retrying a batch: attempt " + std::to_string(attempt) + ": " +
                        OneLine(error.message()));
    };
    std::vector<Store*> stores;
    if (lane_stores_.empty()) stores.push_back(&engine_.store);
    for (const auto& store : lane_stores_) stores.push_back(store.get());
    BatchLoop loop(source_, engine_.decoder, engine_.applier, stores, &source_,
                   LoopOptionsFor(running_.batch), std::move(hooks), g_stop,
                   [this](std::function<void()> hook) { source_.SetRebalanceHook(std::move(hook)); });
    loop_ = &loop;
    window_start_ = std::chrono::steady_clock::now();
    last_progress_ms_.store(SteadyMillis());
    std::atomic<bool> loop_done{false};
    std::thread watcher([this, &loop_done] { WatchForStuckBatches(loop_done); });
    Status status = loop.Run();
    loop_done.store(true);
    watcher.join();
    loop_ = nullptr;
    KeepFanOuts(/*force=*/true);
    if (status.ok()) return kExitOk;
    if (status.IsStaleConfig()) {
      // Fenced: `denormd apply` switched the store's projections. Nothing of
      // the batch in hand was applied; the next pipeline starts from the
      // committed positions with the store's new projections.
      Log(LogLevel::kInfo, "config_epoch_changed", {{"detail", status.message()}});
      reconfigure_ = true;
      return kExitOk;
    }
    Log(LogLevel::kError, "batch_failed", {{"error", status.message()}});
    return kExitFailure;
  }

  // What changes cost, into the store's statistics (a minute's worth at a
  // time; all of it when stopping). A failure is logged and retried.
  void KeepFanOuts(bool force) {
    Status status = fanouts_.Flush(&engine_.store, force);
    if (!status.ok()) Log(LogLevel::kWarn, "fanout_stats_not_kept", {{"error", status.message()}});
  }

  void OnCommit(const CommittedBatch& batch) {
    const std::vector<RawRecord>& records = batch.records;
    const BatchStats& stats = batch.stats;
    const double seconds = batch.seconds;
    fanouts_.Observe(stats.fanouts, running_.limits.fanout_warn);
    metrics_.ObserveFanOuts(stats.fanouts);
    metrics_.AddBatch(stats.applied, stats.stale, stats.dead_letters, stats.documents_written,
                      stats.documents_deleted, seconds, stats.skipped, stats.round_trips,
                      stats.statements);
    if (stats.busy_retries > 0) metrics_.AddBusyRetries(stats.busy_retries, stats.busy_seconds);
    const double now = batch.committed_at;
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

  // On its own thread while the loop runs: the loop marks progress
  // (last_progress_ms_) at every poll, commit and retry pause, so a loop
  // blocked longer than batch.stuck_after_s is inside a statement (a lock
  // another session holds, a hung server) or a Kafka call. /healthz then says
  // so (503), and a stop request is not left waiting on it: after
  // kStopGraceMs the statement is cancelled, the batch rolls back, and the
  // loop sees the stop.
  void WatchForStuckBatches(const std::atomic<bool>& loop_done) {
    bool reported = false;
    int64_t stop_seen_ms = 0;
    int64_t last_cancel_ms = 0;
    while (!loop_done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const int64_t now = SteadyMillis();
      const int64_t blocked_ms = now - last_progress_ms_.load();
      const int64_t stuck_after_ms = static_cast<int64_t>(stuck_after_s_.load()) * 1000;
      if (blocked_ms >= stuck_after_ms) {
        const std::string why = "batch stuck for " + std::to_string(blocked_ms / 1000) +
                                " s (blocked in PostgreSQL or Kafka)";
        health_.SetStuck(why);
        if (!reported) {
          Log(LogLevel::kWarn, "batch_stuck", {{"blocked_s", blocked_ms / 1000}});
          reported = true;
        }
      } else if (reported) {
        reported = false;
        health_.SetStuck("");
        Log(LogLevel::kInfo, "batch_unstuck", {});
      }
      if (!g_stop.load()) continue;
      if (stop_seen_ms == 0) stop_seen_ms = now;
      const int64_t waited_ms = now - std::max(stop_seen_ms, last_progress_ms_.load());
      if (waited_ms >= kStopGraceMs && now - last_cancel_ms >= kStopGraceMs) {
        last_cancel_ms = now;
        // Every lane's: any of them may be the one blocked.
        Status status = engine_.store.CancelRunningStatement();
        for (const auto& store : lane_stores_) {
          Status lane = store->CancelRunningStatement();
          if (status.ok()) status = lane;
        }
        Log(LogLevel::kWarn, "stop_cancelled_statement",
            {{"waited_ms", waited_ms}, {"ok", status.ok()}, {"error", status.message()}});
      }
    }
  }

  // Every retention.interval_s (counted from the start, then from the end of
  // the last prune): what `denormd prune` does, on a thread of its own
  // (PruneThread), beside the batches. A failure is logged and tried again at
  // the next interval: pruning is housekeeping and never stops the run.
  void PruneWhenDue() { prune_.StartIfDue(running_.retention); }

  // An `applying` mark no apply holds the lock for (a killed apply's):
  // every batch journals for it until a prune or the next apply removes it.
  void WarnOfStaleApply() {
    if (engine_.store.stored_model().applying.empty()) return;
    bool running = false;
    if (!engine_.store.AdministrationLocked(&running).ok() || running) return;
    Log(LogLevel::kWarn, "stale_apply_mark",
        {{"schema", engine_.config.store.schema},
         {"note", "an interrupted apply's mark: batches journal for it until `denormd prune` "
                  "(or this process's next prune, or the next `denormd apply`) removes it"}});
  }

  // SIGHUP, between two batches (the loop's thread): tells the service
  // manager, reads the file again and applies what may change live.
  void Reload() {
    notifier_->Notify("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(MonotonicMicros()) +
                      "\nSTATUS=reloading " + OneLine(running_.path));
    const std::string outcome = ApplyReload();
    notifier_->Notify("READY=1\nSTATUS=" + ConsumingStatus() + "; " + OneLine(outcome));
  }

  // Returns the outcome for STATUS=; logs config_reloaded or
  // config_reload_refused.
  std::string ApplyReload() {
    std::vector<std::string> errors;
    std::optional<Config> fresh;
    if (options_.reread_config) fresh = options_.reread_config(&errors);
    if (!fresh) {
      for (const std::string& error : errors) Log(LogLevel::kError, "config_error", {{"error", error}});
      Log(LogLevel::kError, "config_reload_refused",
          {{"file", running_.path},
           {"reason", options_.reread_config ? "the file does not validate (errors above)"
                                             : "this run cannot read its config again"},
           {"kept", "the running configuration"}});
      return "reload refused: invalid configuration";
    }
    const ReloadDecision decision = DecideReload(running_, *fresh);
    if (!decision.accepted()) {
      Log(LogLevel::kError, "config_reload_refused",
          {{"file", running_.path}, {"changed", JoinSettings(decision.needs_restart)},
           {"needs", RefusedReloadRemedy(decision)},
           {"reason", "these settings cannot change while denormd runs; nothing was applied"},
           {"kept", "the running configuration"}});
      return "reload refused: " + JoinSettings(decision.needs_restart) + " need " +
             RefusedReloadRemedy(decision);
    }
    running_.batch = fresh->batch;
    stuck_after_s_.store(running_.batch.stuck_after_s);
    running_.retention = fresh->retention;
    running_.limits = fresh->limits;
    running_.log = fresh->log;
    ApplyLogConfig(running_.log);
    loop_->SetOptions(LoopOptionsFor(running_.batch));
    source_.SetMaxEventBytes(running_.batch.max_event_bytes);
    Log(LogLevel::kInfo, "config_reloaded",
        {{"file", running_.path}, {"changed", JoinSettings(decision.live)},
         {"batch_max_events", running_.batch.max_events},
         {"batch_max_delay_ms", running_.batch.max_delay_ms},
         {"batch_max_event_bytes", running_.batch.max_event_bytes},
         {"log_level", LogLevelName(running_.log.level)},
         {"log_format", LogFormatName(running_.log.format)}});
    return "configuration reloaded (changed: " + JoinSettings(decision.live) + ")";
  }

  // "consuming <topics> as group <group> into schema <schema>"
  std::string ConsumingStatus() const {
    std::string topics;
    for (const std::string& topic : running_.kafka->topics) {
      topics += (topics.empty() ? "" : ",") + topic;
    }
    // One line whatever the config's strings hold (a newline would start
    // another assignment to the service manager).
    return OneLine("consuming " + topics + " as group " + running_.kafka->group +
                   " into schema " + running_.store.schema);
  }

  void UpdateLag() {
    auto now = std::chrono::steady_clock::now();
    if (now - last_lag_update_ < std::chrono::seconds(1)) return;
    last_lag_update_ = now;
    metrics_.SetLag(source_.Lag());
  }

  // STOPPING=1, once: as soon as the loop sees a stop request (it then
  // finishes the batch in hand), or when shutting down for another reason
  // (keeping the STATUS= that said why).
  void NoteStopping(const std::string& status = "") {
    if (stopping_noted_) return;
    stopping_noted_ = true;
    notifier_->Notify("STOPPING=1" + (status.empty() ? "" : "\nSTATUS=" + status));
  }

  int Shutdown(int code) {
    if (!reconfigure_) NoteStopping();
    prune_.Stop();
    if (relay_) relay_->Stop();
    source_.Close();
    if (!reconfigure_) http_.Stop();  // else the next pipeline serves on
    Log(LogLevel::kInfo, reconfigure_ ? "pipeline_restarting" : "daemon_stopped",
        {{"exit_code", code}, {"signal", g_signal.load()}, {"peak_rss_kib", PeakRssKib()}});
    return code;
  }

 public:
  // Run() ended because the store runs other projections: start again with
  // the store's (RunDaemon does).
  bool reconfigure() const { return reconfigure_; }

 private:
  const RunOptions& options_;
  const std::unique_ptr<ServiceNotifier> notifier_;
  bool reconfigure_ = false;
  Engine engine_;
  // The settings in effect: engine_.config's, with the batch and log
  // sections of the last accepted reload.
  Config running_;
  // The model's parts that batches apply beside each other
  // (projections/lanes.h); with more than one, a store each.
  const Lanes lanes_;
  std::vector<std::unique_ptr<StoreAdministration>> lane_stores_;
  KafkaEventSource source_;
  Metrics& metrics_;
  Health& health_;
  MetricsHttpServer& http_;
  std::unique_ptr<RelayThread> relay_;
  BatchLoop* loop_ = nullptr;  // while Loop() runs
  // Set by the loop's thread, read by WatchForStuckBatches.
  std::atomic<int64_t> last_progress_ms_{0};
  std::atomic<uint64_t> stuck_after_s_{running_.batch.stuck_after_s};
  bool stopping_noted_ = false;
  FanOutRecorder fanouts_;  // the loop's thread
  std::chrono::steady_clock::time_point last_lag_update_;
  std::chrono::steady_clock::time_point window_start_;
  PruneThread prune_{engine_.config, PostgresStores(options_.postgres)};
  uint64_t total_events_ = 0;
  uint64_t window_events_ = 0;
};

// `denormd relay`: the store opened (and the outbox created), then the
// relay on its thread until a stop signal.
class RelayDaemon {
 public:
  RelayDaemon(Config config, const RunOptions& options)
      : options_(options),
        notifier_(ServiceNotifierFromEnvironment()),
        config_(std::move(config)),
        store_(PostgresStores(options.postgres)(config_)),
        http_([this] { return metrics_.Render(); },
              [this](std::string* why) { return health_.Get(why); }) {}

  int Run() {
    InstallSignalHandlers();
    if (options_.metrics_port > 0) {
      Status status = http_.Start(options_.metrics_address, options_.metrics_port);
      if (!status.ok()) return StartFailed(*notifier_, status, kExitUsage);
    }
    Status opened = OpenStoreWaiting(
        [this] { return store_->Open(StoreAdministration::OpenMode::kInspect); }, health_,
        metrics_, *notifier_);
    if (!opened.ok()) return Shutdown(StartFailed(*notifier_, opened, kExitUsage));
    if (g_stop.load()) return Shutdown(kExitOk);
    RelayThread relay(config_, options_.postgres, DefaultFeedSink(), &metrics_);
    relay.Start();
    Log(LogLevel::kInfo, "relay_started",
        {{"schema", config_.store.schema}, {"metrics_port", http_.port()}});
    notifier_->Notify("READY=1\nSTATUS=publishing the change feed of schema " +
                      config_.store.schema);
    // The relay runs on its own thread; this one only keeps the watchdog fed
    // until a stop request.
    SleepUnlessStopping(INT32_MAX, *notifier_);
    relay.Stop();
    return Shutdown(kExitOk);
  }

 private:
  int Shutdown(int code) {
    notifier_->Notify("STOPPING=1");
    http_.Stop();
    Log(LogLevel::kInfo, "relay_stopped",
        {{"exit_code", code}, {"signal", g_signal.load()}, {"peak_rss_kib", PeakRssKib()}});
    return code;
  }

  const RunOptions& options_;
  const std::unique_ptr<ServiceNotifier> notifier_;
  const Config config_;
  const std::unique_ptr<StoreAdministration> store_;
  Metrics metrics_;
  Health health_;
  MetricsHttpServer http_;
};

// The store's model applied to `config` (its other settings kept).
Status LoadStoreModel(const RunOptions& options, Config* config) {
  StoredModel model;
  DENORMD_RETURN_IF_ERROR(PostgresStores(options.postgres)(*config)->ReadModel(&model));
  std::vector<ConfigError> errors;
  std::optional<Config> next =
      WithModel(*config, model.yaml,
                "the store's projections (epoch " + std::to_string(model.epoch) + ")", &errors);
  if (!next) {
    std::string text;
    for (const ConfigError& error : errors) text += "; " + error.ToString("");
    return Status::InvalidInput("the store's projections (epoch " + std::to_string(model.epoch) +
                                ") do not fit this file's other settings" + text);
  }
  Log(LogLevel::kInfo, "config_loaded_from_store",
      {{"epoch", model.epoch}, {"fingerprint", model.fingerprint},
       {"projections", next->projections.size()}});
  *config = std::move(*next);
  return Status::Ok();
}

// LoadStoreModel, waiting out a store that cannot be reached (as a start-up
// does: each attempt logged, the service manager told, the watchdog fed)
// until it answers or a stop is requested (then Ok, `config` unchanged).
// `apply` has just switched the model, so an outage here is as likely as
// anywhere; giving up would make the service manager restart the daemon for
// what waiting mends.
Status LoadStoreModelWaiting(const RunOptions& options, DaemonSurface& surface, Config* config) {
  const std::unique_ptr<ServiceNotifier> notifier = ServiceNotifierFromEnvironment();
  for (int attempt = 1; !g_stop.load(); ++attempt) {
    Status status = LoadStoreModel(options, config);
    if (!status.IsTransient()) return status;
    surface.health.Set(false, kStoreUnavailable);
    surface.metrics.SetStoreHealthy(false);
    Log(LogLevel::kWarn, "store_unavailable",
        {{"attempt", attempt}, {"reading", "the store's projections"}, {"error", status.message()}});
    notifier->Notify("STATUS=waiting for PostgreSQL to read the store's projections: attempt " +
                     std::to_string(attempt) + ": " + OneLine(status.message()));
    SleepUnlessStopping(RetryBackoffMs(attempt), *notifier);
  }
  return Status::Ok();
}

}  // namespace

int RunDaemon(Config config, const RunOptions& options) {
  g_stop.store(false);
  g_reload.store(false);
  DaemonSurface surface;
  // A new pipeline per model: `apply` fences the old one (StaleConfig).
  while (true) {
    {
      Daemon daemon(config, options, &surface);
      const int code = daemon.Run();
      if (!daemon.reconfigure() || g_stop.load()) return code;
    }
    surface.health.SetStuck("");  // that pipeline's batches are over
    Status status = LoadStoreModelWaiting(options, surface, &config);
    if (g_stop.load()) return kExitOk;
    if (!status.ok()) {
      Log(LogLevel::kError, "config_load_failed", {{"error", status.message()}});
      return status.IsInvalidInput() ? kExitUsage : kExitFailure;
    }
  }
}

int RunRelay(Config config, const RunOptions& options) {
  g_stop.store(false);
  RelayDaemon daemon(std::move(config), options);
  return daemon.Run();
}

}  // namespace denormd
