// The commands about a store's data: replay, rebuild, verify, status, prune,
// adopt.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#include "common/log.h"
#include "common/process.h"
#include "common/text.h"
#include "connectors/kafka_source.h"
#include "connectors/postgres_admin.h"
#include "daemon/prune_thread.h"
#include "daemon/cli.h"
#include "daemon/command_line.h"
#include "daemon/replay.h"
#include "projections/advice.h"
#include "projections/maintenance.h"

namespace denormd {

int ReplayCommand(const Arguments& args) {
  if (args.rest.empty()) {
    std::cerr << "denormd replay: name at least one event log (or - for stdin)\n";
    return kExitUsage;
  }
  std::unique_ptr<Engine> engine;
  if (int code = OpenEngine(args, &engine)) return code;
  bool progress = !args.quiet && isatty(STDERR_FILENO);
  int exit_code = kExitOk;
  for (const std::string& path : args.rest) {
    auto start = std::chrono::steady_clock::now();
    ReplayOptions options;
    options.batch_size = engine->config.batch.max_events;
    options.fanout_warn = engine->config.limits.fanout_warn;
    options.max_event_bytes = engine->config.batch.max_event_bytes;
    if (progress) {
      options.on_batch = [&](const std::string& /*source*/, const BatchStats& total, uint64_t read,
                             uint64_t size) {
        double seconds = SecondsSince(start);
        std::fprintf(stderr, "\r%s: %s events", path.c_str(), FormatCount(total.events).c_str());
        if (size > 0) std::fprintf(stderr, " (%.0f%%)", 100.0 * read / size);
        std::fprintf(stderr, ", %.0f events/s   ", seconds > 0 ? total.events / seconds : 0.0);
      };
    }
    options.on_retry = [&](const Status& error, int attempt) {
      Log(LogLevel::kWarn, "batch_retry",
          {{"log", path}, {"attempt", attempt}, {"error", error.message()}});
    };
    ReplayReport report;
    Status status =
        ReplayLog(engine->decoder, engine->applier, &engine->store, path, options, &report);
    if (progress) std::fprintf(stderr, "\n");
    if (!status.ok()) {
      std::cerr << "denormd replay: " << path << ": " << status.message()
                << "\n  (everything up to line " << report.last_line
                << " is committed; run again to resume)\n";
      exit_code = kExitFailure;
      continue;
    }
    double seconds = SecondsSince(start);
    const BatchStats& s = report.stats;
    if (s.events == 0) {
      std::cout << path << ": nothing to apply: already applied up to line "
                << report.resumed_after_line << "\n";
      continue;
    }
    std::cout << path << ": " << CountOf(s.events, "event")
              << (report.resumed_after_line > 0
                      ? " (resumed after line " + std::to_string(report.resumed_after_line) + ")"
                      : "")
              << " in " << CountOf(report.batches, "transaction") << ", " << std::fixed;
    std::cout.precision(2);
    std::cout << seconds << " s: " << FormatCount(s.applied) << " applied, "
              << FormatCount(s.stale) << " stale, " << CountOf(s.dead_letters, "dead letter")
              << "; " << CountOf(s.documents_written, "document") << " written, "
              << FormatCount(s.documents_deleted) << " deleted; " << FormatCount(s.round_trips)
              << " round trips to PostgreSQL (" << FormatCount(s.statements)
              << " statements); peak RSS " << PeakRssKib() / 1024 << " MiB\n";
  }
  return exit_code;
}

namespace {

int RebuildOrVerify(const Arguments& args, bool verify) {
  std::unique_ptr<Engine> engine;
  // rebuild changes the index and may record its model: the lock apply and
  // plan take, before the model is read.
  std::unique_ptr<AdministrationLock> lock;
  if (int code = OpenEngine(args, &engine,
                            verify ? StoreAdministration::OpenMode::kRunsThisModel
                                   : StoreAdministration::OpenMode::kBuild,
                            verify ? nullptr : &lock)) {
    return code;
  }
  MaintenanceOptions options;
  options.projections = args.rest;
  options.sample = args.verify_sample;
  bool progress = !args.quiet && isatty(STDERR_FILENO);
  if (progress) {
    options.on_page = [](const std::string& projection, uint64_t units) {
      std::fprintf(stderr, "\r%s: %s documents   ", projection.c_str(), FormatCount(units).c_str());
    };
  }
  auto start = std::chrono::steady_clock::now();
  if (verify) {
    std::vector<std::string> differences;
    Status status = Verify(engine->plan, &engine->store, options, &differences);
    if (progress) std::fprintf(stderr, "\n");
    if (!status.ok()) {
      std::cerr << "denormd verify: " << status.message() << "\n";
      return status.IsInvalidInput() ? kExitUsage : kExitFailure;
    }
    for (const std::string& line : differences) std::cout << line << "\n";
    if (!differences.empty()) {
      std::cout << differences.size() << " difference" << (differences.size() == 1 ? "" : "s")
                << "; `denormd rebuild` repairs them\n";
      return kExitFailure;
    }
    std::cout << "verify: all " << (options.sample ? "sampled " : "")
              << "documents match their definitions, recomputed from the source rows (";
    if (options.sample) std::cout << "at most " << FormatCount(options.sample) << " a projection, ";
    std::cout << std::fixed;
    std::cout.precision(2);
    std::cout << SecondsSince(start) << " s)\n";
    return kExitOk;
  }
  // The reference index first: documents are computed through it.
  uint64_t indexed = 0;
  Status status = Reindex(engine->plan, &engine->store, options, &indexed);
  if (status.ok()) status = lock->Check();
  if (status.ok()) status = engine->store.MarkIndexCurrent();
  BatchStats stats;
  if (status.ok()) status = Rebuild(engine->plan, &engine->store, options, &stats);
  if (status.ok()) status = lock->Check();
  // The store now runs this file's projections (running instances of
  // another model see the epoch move and load these); only from the epoch
  // Open read.
  if (status.ok() && args.rest.empty()) status = engine->store.RecordModel();
  if (progress) std::fprintf(stderr, "\n");
  if (!status.ok()) {
    std::cerr << "denormd rebuild: " << status.message() << "\n";
    return status.IsInvalidInput() ? kExitUsage : kExitFailure;
  }
  std::cout << "rebuild: " << FormatCount(indexed) << " entities reindexed, "
            << FormatCount(stats.units_recomputed) << " units recomputed, "
            << FormatCount(stats.documents_written) << " documents written, "
            << FormatCount(stats.documents_deleted) << " deleted (" << std::fixed;
  std::cout.precision(2);
  std::cout << SecondsSince(start) << " s)\n";
  return kExitOk;
}

}  // namespace

int RebuildCommand(const Arguments& args) { return RebuildOrVerify(args, /*verify=*/false); }
int VerifyCommand(const Arguments& args) { return RebuildOrVerify(args, /*verify=*/true); }

// The changes that cost the most documents this hour and the last, by
// entity type and changed field (what `run` and `replay` keep).
void PrintLargestFanOuts(Store* store) {
  std::vector<FanOutStat> stats;
  std::unique_ptr<StoreTransaction> txn;
  Status status = store->Begin(&txn);
  if (status.ok()) status = txn->ledger().ReadFanOuts(7200, &stats);
  std::cout << "\nlargest fan-out this hour and the last (documents one change made a batch "
               "recompute):\n";
  if (!status.ok()) {
    std::cout << "  (unavailable: " << status.message() << ")\n";
    return;
  }
  // Per type and field over both hours, the largest change first.
  std::vector<FanOutStat> top = FanOutsByField(stats);
  std::stable_sort(top.begin(), top.end(), [](const FanOutStat& a, const FanOutStat& b) {
    return a.max_documents > b.max_documents;
  });
  if (top.empty()) std::cout << "  (no changes recorded)\n";
  for (size_t i = 0; i < top.size() && i < 5; ++i) {
    const FanOutStat& t = top[i];
    std::cout << "  " << t.type << "." << t.field << ": " << FormatCount(t.max_documents)
              << (t.max_documents == 1 ? " document" : " documents") << " at most (" << t.type
              << " " << t.max_id << "); "
              << CountOf(t.changes, "change") << ", " << FormatCount(t.documents)
              << " documents in all\n";
  }
}

int StatusCommand(const Arguments& args) {
  std::unique_ptr<Engine> engine;
  if (int code = OpenEngine(args, &engine, StoreAdministration::OpenMode::kInspect)) return code;
  const Config& config = engine->config;
  StoreSummary summary;
  Status status = engine->store.Summarize(&summary);
  if (!status.ok()) {
    std::cerr << "denormd status: " << status.message() << "\n";
    return kExitFailure;
  }
  std::map<std::string, int64_t> end_offsets;
  std::string lag_error;
  if (config.kafka) {
    Status lag = QueryKafkaEndOffsets(config, &end_offsets);
    if (!lag.ok()) lag_error = lag.message();
  }
  const StoredModel& model = engine->store.stored_model();
  std::cout << "schema " << config.store.schema << "\n\nprojections: epoch " << model.epoch
            << " (fingerprint " << model.fingerprint << ")"
            << (model.fingerprint == ModelFingerprint(config)
                    ? ""
                    : "; " + args.config_path + " differs: `" + CommandName() + " plan -c " +
                          args.config_path +
                          "` shows how")
            << "\n";
  if (!model.applying.empty()) {
    bool running = false;
    Status held = engine->store.AdministrationLocked(&running);
    if (held.ok() && !running) {
      std::cout << "  an apply was interrupted (" << model.applying
                << "): stale, no apply holds the lock; batches journal their changes for it "
                   "until `denormd prune` (or `run`'s next prune, or the next `denormd apply`) "
                   "removes it\n";
    } else {
      std::cout << "  an apply is building (" << model.applying
                << "); batches journal their changes for it until it finishes\n";
    }
  }
  if (!summary.leftover_tables.empty()) {
    std::cout << "  tables a killed plan or apply left:";
    for (const std::string& table : summary.leftover_tables) std::cout << " " << table;
    std::cout << " (the next plan or apply removes them)\n";
  }
  std::cout << "\nstreams (each partition or log, per lane when the model has parts that share "
               "no document: the next offset or line denormd reads, the "
               "end offset Kafka has, and the lag between them; the events applied, stale (not "
               "newer than the stored version) and dead (dead letters)):\n";
  if (summary.positions.empty()) std::cout << "  (none yet)\n";
  for (const StoredPosition& p : summary.positions) {
    // The stored position is the last one applied; the next is +1.
    // A lane's row (projections/lanes.h) counts the records of its types.
    std::cout << "  " << p.at.source << " partition " << p.at.partition
              << (p.lane.empty() ? "" : " lane " + LaneText(p.lane)) << ": next offset "
              << p.at.position + 1;
    auto end = end_offsets.find(p.at.source + "/" + std::to_string(p.at.partition));
    if (end != end_offsets.end()) {
      std::cout << ", end offset " << end->second << ", lag "
                << std::max<int64_t>(0, end->second - (p.at.position + 1)) << " events";
    }
    std::cout << "; applied " << FormatCount(p.applied) << ", stale " << FormatCount(p.stale)
              << ", dead " << FormatCount(p.dead) << "\n";
  }
  if (!lag_error.empty()) std::cout << "  (Kafka end offsets unavailable: " << lag_error << ")\n";
  std::cout << "\nentities:\n";
  for (const auto& e : summary.entities) {
    std::cout << "  " << e.first << ": " << FormatCount(e.second) << "\n";
  }
  std::cout << "  tombstones: " << FormatCount(summary.tombstones) << "\n\ncollections:\n";
  for (const auto& c : summary.documents) {
    std::cout << "  " << c.first << ": " << CountOf(c.second, "document") << "\n";
  }
  std::cout << "\ndead letters: " << FormatCount(summary.dead_letters) << "\n";
  PrintLargestFanOuts(&engine->store);
  if (summary.feed) {
    std::cout << "\nchange feed (" << config.feed->transactional_id << "):\n"
              << "  outbox: " << FormatCount(summary.outbox.rows) << " changes waiting";
    if (summary.outbox.rows > 0) {
      std::cout << ", the oldest " << std::fixed;
      std::cout.precision(1);
      std::cout << summary.outbox.oldest_seconds << " s old";
    }
    std::cout << "\n";
    if (summary.feed_relay.empty()) {
      std::cout << "  published: nothing yet\n";
    } else {
      std::cout << "  published: sequence " << FormatCount(summary.feed_sequence) << ", last "
                << std::fixed;
      std::cout.precision(1);
      std::cout << summary.feed_published_seconds_ago << " s ago\n";
    }
  }
  return kExitOk;
}

int PruneCommand(const Arguments& args) {
  std::unique_ptr<Engine> engine;
  if (int code = OpenEngine(args, &engine, StoreAdministration::OpenMode::kInspect)) return code;
  const RetentionConfig& retention = engine->config.retention;
  const bool progress = !args.quiet && isatty(STDERR_FILENO);
  auto start = std::chrono::steady_clock::now();
  PruneReport report;
  Status status = engine->store.Prune(
      retention, kPruneChunkRows, &report,
      [progress](const PruneReport& so_far) {
        if (progress) std::fprintf(stderr, "\r%s rows removed   ", FormatCount(so_far.total()).c_str());
      },
      nullptr);
  if (progress) std::fprintf(stderr, "\n");
  if (!status.ok()) {
    std::cerr << "denormd prune: " << status.message() << " (" << FormatCount(report.total())
              << " rows removed before it)\n";
    return kExitFailure;
  }
  if (report.stale_apply_cleared) {
    std::cout << "prune: removed an interrupted apply's mark, its " << FormatCount(report.stale_journal_rows)
              << " journal rows and its __next tables (no apply held the lock)\n";
  }
  std::cout << "prune: " << FormatCount(report.tombstones) << " tombstones";
  if (retention.tombstone_hours == 0) {
    std::cout << " (kept: retention.tombstone_hours is 0)";
  } else {
    std::cout << " older than " << retention.tombstone_hours << " h";
  }
  std::cout << ", " << FormatCount(report.dead_letters) << " dead letters, "
            << FormatCount(report.lock_rows) << " lock rows, " << FormatCount(report.zero_counts)
            << " zero counters removed (" << std::fixed;
  std::cout.precision(2);
  std::cout << SecondsSince(start) << " s)\n";
  return kExitOk;
}

int AdoptCommand(const Arguments& args) {
  std::optional<Config> config = LoadConfigOrReport(args);
  if (!config) return kExitUsage;
  const std::unique_ptr<StoreAdministration> store =
      PostgresStores(ConnectionOf(args, *config))(*config);
  std::unique_ptr<AdministrationLock> lock;
  Status status = store->LockAdministration("adopt", &lock);
  std::vector<std::string> adopted;
  if (status.ok()) status = store->Adopt(&adopted);
  if (!status.ok()) {
    std::cerr << "denormd adopt: " << status.message() << "\n";
    return status.IsInvalidInput() ? kExitUsage : kExitFailure;
  }
  std::cout << "adopt: schema " << config->store.schema << ": " << adopted.size()
            << " tables and indexes marked as denormd's";
  for (size_t i = 0; i < adopted.size(); ++i) std::cout << (i == 0 ? ": " : ", ") << adopted[i];
  std::cout << "\n";
  return kExitOk;
}

}  // namespace denormd
