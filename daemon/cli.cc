#include "daemon/cli.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <iostream>
#include <optional>

#include "common/log.h"
#include "common/process.h"
#include "common/redact.h"
#include "common/text.h"
#include "config/config.h"
#include "connectors/kafka_publisher.h"
#include "connectors/kafka_source.h"
#include "connectors/postgres_store.h"
#include "daemon/apply.h"
#include "daemon/engine.h"
#include "daemon/reload.h"
#include "daemon/replay.h"
#include "daemon/run.h"
#include "daemon/test_command.h"
#include "projections/derivations/registry.h"
#include "projections/maintenance.h"

namespace denormd {

namespace {

constexpr const char* kUsage = R"(denormd - keeps denormalized read documents exactly right as normalized data changes

Usage: denormd COMMAND -c CONFIG [OPTIONS] [ARGS]

Commands:
  run                      consume Kafka (source.kafka in the config) and apply batches
                           until SIGTERM or SIGINT, which finish the batch, commit, exit 0
  replay FILE...           apply JSON Lines event logs ("-" is stdin); a log already
                           applied up to some line resumes after it
  rebuild [PROJECTION...]  recompute projections from the stored source (default: all)
  verify [PROJECTION...]   recompute every document from the source rows alone (not
                           through the index or counters), compare with the tables, and
                           check the index and counters; list differences; exit 1 if any
  status                   stream positions, Kafka lag, documents per collection,
                           dead letters
  check                    validate the config; list every error with its place
  plan                     what `apply` of this config would change in the store: the
                           projections, collections and index relations added, removed
                           or changed, and the documents written, deleted, unchanged
                           (built from the stored source); exit 0 nothing would change,
                           3 something would
  apply                    make this config's projections the ones the store runs,
                           online: builds what changed beside the old tables while the
                           daemons go on, catches up, then switches in one transaction;
                           running `run` instances load the new projections themselves
  adopt                    mark a store made by a denormd older than the mark of
                           ownership as denormd's (its tables of denormd's names, with
                           meta of denormd's layout); other commands refuse a schema
                           holding tables of those names without the mark
  prune                    remove what retention (in the config) no longer keeps:
                           tombstones past the horizon, old dead letters, unused lock
                           rows and zero counters; safe while instances run
  publish FILE...          send JSON Lines event logs to the first source.kafka topic
                           (or --topic), keyed type:id; for loading and demos
  relay                    publish the change feed (feed in the config) until SIGTERM or
                           SIGINT, without consuming; `run` does it too unless --no-relay
  test FILE...             apply JSON Lines event logs in memory (no PostgreSQL, no
                           Kafka: nothing connects) and check the documents they make;
                           dead letters are listed with line and reason

Options:
  -c, --config FILE        the YAML configuration (required; see docs/configuration.md)
  --postgres URL           PostgreSQL connection string; overrides $DENORMD_POSTGRES
                           and store.postgres
  --batch-size N           events per transaction (default: batch.max_events, 5000)
  --metrics-port PORT      run, relay: serve Prometheus /metrics and /healthz on PORT
                           (0 = off, the default)
  --metrics-address ADDR   run: address to listen on (default 127.0.0.1)
  --no-relay               run: leave the change feed to `denormd relay` processes
  --topic TOPIC            publish: the topic (default: the first of source.kafka.topics)
  --json                   plan, apply: the report as one JSON object on stdout
  --sample F               plan: build only this fraction of the documents (0 < F <= 1)
                           and extrapolate the counts and the time (default 1: exact)
  --sample N               verify: check N documents of each projection and N entities
                           of each type's index rows, chosen at random (default: all)
  --expect FILE            test: compare with FILE ({"collections": {NAME: {ID: DOC}},
                           "dead": N, "stale": N}); list each difference; exit 1 if any
  --update                 test: write the --expect FILE from the result instead
  --dump                   test: print the result as such a JSON object on stdout
  --batch N[,N...]         test: run the logs at each batch size (default
                           batch.max_events); exit 1 if any two results differ
  -q, --quiet              no progress output, warnings and errors only
                           (overrides log.level)
  -v, --verbose            debug log lines (overrides log.level); test: every
                           difference (else the first 100)
  --log-format FORMAT      log lines on stderr as text (key=value, the default)
                           or json (one object per line); overrides
                           $DENORMD_LOG_FORMAT and log.format
  -h, --help               this text

Environment:
  DENORMD_POSTGRES         connection string (overrides store.postgres)
  DENORMD_KAFKA_BROKERS    bootstrap servers (overrides source.kafka.brokers, and the
                           feed's when it has none of its own)
  DENORMD_FEED_BROKERS     bootstrap servers of the change feed (overrides feed.brokers)
  DENORMD_LOG_FORMAT       text or json (overrides log.format)
  NOTIFY_SOCKET            run: the systemd notification socket (Type=notify):
                           READY=1 once the store is open and the topics
                           subscribed, WATCHDOG=1 when WATCHDOG_USEC is set

Signals (run): SIGTERM, SIGINT finish the batch, commit and exit 0; SIGHUP reads
the config again and applies batch.*, retention.* and log.* between batches; any
other change is refused with a config_reload_refused log line, the old config kept.

Exit status: 0 success; 1 failure, or differences found by verify or test; 2 bad usage
or config; 3 plan: applying the config would change the store.

Examples:
  denormd check -c library.yaml
  denormd replay -c library.yaml events.jsonl
  denormd verify -c library.yaml books authors
  denormd plan -c library-v2.yaml && denormd apply -c library-v2.yaml
  denormd test -c library.yaml events.jsonl --expect expected.json --batch 1,7,5000
  DENORMD_POSTGRES=postgresql://127.0.0.1:5432/denorm denormd run -c library.yaml --metrics-port 9464
)";

struct Arguments {
  std::string command;
  std::string config_path;
  std::optional<std::string> postgres;
  std::optional<size_t> batch_size;
  int metrics_port = 0;
  std::string metrics_address = "127.0.0.1";
  std::string topic;
  bool no_relay = false;
  bool json = false;     // plan, apply
  double sample = 1.0;   // plan
  uint64_t verify_sample = 0;  // verify: documents per projection; 0 = all
  // test
  std::optional<std::string> expect;
  bool update = false;
  bool dump = false;
  std::vector<size_t> batch_sizes;
  bool quiet = false;
  bool verbose = false;
  std::optional<LogFormat> log_format;  // --log-format, else $DENORMD_LOG_FORMAT
  bool help = false;
  std::vector<std::string> rest;
};

bool ParseNumber(const std::string& text, uint64_t* out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
  try {
    *out = std::stoull(text);
  } catch (...) {
    return false;
  }
  return true;
}

// InvalidInput saying what is wrong with the arguments.
Status ParseArguments(const std::vector<std::string>& args, Arguments* out) {
  std::optional<std::string> sample_text;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&](std::string* v) -> bool {
      size_t eq = arg.find('=');
      if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
        *v = arg.substr(eq + 1);
        return true;
      }
      if (i + 1 >= args.size()) return false;
      *v = args[++i];
      return true;
    };
    auto is = [&](const char* name) {
      return arg == name || arg.rfind(std::string(name) + "=", 0) == 0;
    };
    std::string v;
    if (arg == "-h" || arg == "--help") {
      out->help = true;
    } else if (arg == "-c" || is("--config")) {
      if (!value(&v)) return Status::InvalidInput(arg + " needs a file");
      out->config_path = v;
    } else if (is("--postgres")) {
      if (!value(&v)) return Status::InvalidInput("--postgres needs a connection string");
      out->postgres = v;
    } else if (is("--batch-size")) {
      uint64_t n = 0;
      if (!value(&v) || !ParseNumber(v, &n) || n == 0) {
        return Status::InvalidInput("--batch-size needs a whole number >= 1");
      }
      out->batch_size = n;
    } else if (is("--metrics-port")) {
      uint64_t n = 0;
      if (!value(&v) || !ParseNumber(v, &n) || n > 65535) {
        return Status::InvalidInput("--metrics-port needs a port number (0-65535)");
      }
      out->metrics_port = static_cast<int>(n);
    } else if (is("--metrics-address")) {
      if (!value(&v)) return Status::InvalidInput("--metrics-address needs an address");
      out->metrics_address = v;
    } else if (is("--topic")) {
      if (!value(&v)) return Status::InvalidInput("--topic needs a topic name");
      out->topic = v;
    } else if (arg == "--no-relay") {
      out->no_relay = true;
    } else if (arg == "--json") {
      out->json = true;
    } else if (is("--sample")) {
      if (!value(&v) || v.empty()) return Status::InvalidInput("--sample needs a value");
      sample_text = v;  // read once the command is known
    } else if (is("--log-format")) {
      LogFormat format;
      if (!value(&v) || !ParseLogFormat(v, &format)) {
        return Status::InvalidInput("--log-format needs text or json");
      }
      out->log_format = format;
    } else if (is("--expect")) {
      if (!value(&v) || v.empty()) return Status::InvalidInput("--expect needs a file");
      out->expect = v;
    } else if (arg == "--update") {
      out->update = true;
    } else if (arg == "--dump") {
      out->dump = true;
    } else if (is("--batch")) {
      if (!value(&v)) return Status::InvalidInput("--batch needs batch sizes, e.g. 1,7,5000");
      out->batch_sizes.clear();
      for (size_t start = 0; start <= v.size();) {
        size_t comma = std::min(v.find(',', start), v.size());
        uint64_t n = 0;
        if (!ParseNumber(v.substr(start, comma - start), &n) || n == 0) {
          return Status::InvalidInput("--batch needs whole numbers >= 1 separated by commas, "
                                      "e.g. 1,7,5000 (got \"" + v + "\")");
        }
        out->batch_sizes.push_back(n);
        start = comma + 1;
      }
    } else if (arg == "-q" || arg == "--quiet") {
      out->quiet = true;
    } else if (arg == "-v" || arg == "--verbose") {
      out->verbose = true;
    } else if (arg == "-") {
      out->rest.push_back(arg);
    } else if (!arg.empty() && arg[0] == '-') {
      return Status::InvalidInput("unknown option " + arg);
    } else if (out->command.empty()) {
      out->command = arg;
    } else {
      out->rest.push_back(arg);
    }
  }
  if (!sample_text) return Status::Ok();
  if (out->command == "verify") {
    if (!ParseNumber(*sample_text, &out->verify_sample) || out->verify_sample == 0) {
      return Status::InvalidInput("verify --sample needs a whole number of documents >= 1, "
                                  "e.g. 10000 (got \"" + *sample_text + "\")");
    }
    return Status::Ok();
  }
  char* end = nullptr;
  out->sample = std::strtod(sample_text->c_str(), &end);
  if (*end != '\0' || !(out->sample > 0 && out->sample <= 1)) {
    return Status::InvalidInput("--sample needs a fraction above 0 and at most 1, e.g. 0.05");
  }
  return Status::Ok();
}

// $DENORMD_LOG_FORMAT, when --log-format is not given; InvalidInput when
// it names no format.
Status ReadLogFormatFromEnvironment(Arguments* args) {
  const char* env = std::getenv("DENORMD_LOG_FORMAT");
  if (args->log_format || env == nullptr || *env == '\0') return Status::Ok();
  LogFormat format;
  if (!ParseLogFormat(env, &format)) {
    return Status::InvalidInput("DENORMD_LOG_FORMAT must be text or json, not \"" +
                                std::string(env) + "\"");
  }
  args->log_format = format;
  return Status::Ok();
}

// The configuration a command runs with: the file, validated, then the
// environment and the command line on top of it. Reading it again (a
// reload) gives the same overrides.
std::optional<Config> LoadEffectiveConfig(const Arguments& args, std::vector<ConfigError>* errors) {
  std::optional<Config> config = LoadConfig(args.config_path, errors);
  if (!config) return config;
  // $DENORMD_KAFKA_BROKERS overrides source.kafka.brokers, as
  // $DENORMD_POSTGRES overrides store.postgres: one config file serves
  // every environment.
  const char* brokers = std::getenv("DENORMD_KAFKA_BROKERS");
  if (config->kafka && brokers != nullptr && *brokers != '\0') {
    // A feed without brokers of its own follows the source's.
    if (config->feed && config->feed->brokers == config->kafka->brokers) {
      config->feed->brokers = brokers;
    }
    config->kafka->brokers = brokers;
  }
  const char* feed_brokers = std::getenv("DENORMD_FEED_BROKERS");
  if (config->feed && feed_brokers != nullptr && *feed_brokers != '\0') {
    config->feed->brokers = feed_brokers;
  }
  if (args.batch_size) config->batch.max_events = *args.batch_size;
  if (args.verbose) config->log.level = LogLevel::kDebug;
  if (args.quiet) config->log.level = LogLevel::kWarn;
  if (args.log_format) config->log.format = *args.log_format;
  return config;
}

// LoadEffectiveConfig, its errors printed; the process logs as it says.
std::optional<Config> LoadConfigOrReport(const Arguments& args) {
  const std::string& path = args.config_path;
  std::vector<ConfigError> errors;
  std::optional<Config> config = LoadEffectiveConfig(args, &errors);
  for (const ConfigError& error : errors) std::cerr << error.ToString(path) << "\n";
  // A file that could not be read has no errors of its contents to count.
  const bool unread = errors.size() == 1 && errors[0].place.line == 0 &&
                      errors[0].message.rfind("cannot read the config file", 0) == 0;
  if (!config && !unread) {
    std::cerr << path << ": " << errors.size() << " error" << (errors.size() == 1 ? "" : "s")
              << "; see docs/configuration.md\n";
  }
  if (!config) return config;
  ApplyLogConfig(config->log);
  return config;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int Check(const Arguments& args) {
  std::optional<Config> config = LoadConfigOrReport(args);
  if (!config) return kExitUsage;
  std::cout << args.config_path << ": ok: " << config->entities.size() << " entity types, "
            << config->projections.size() << " projections into "
            << config->CollectionNames().size()
            << " collections in schema " << config->store.schema << "\n";
  return kExitOk;
}

// Opens the engine the commands that use the database share: the config,
// its plan and the store, opened. Returns an exit code (kExitOk on success).
// With `lock`, the schema's administration lock is taken first (before the
// store's model is read), and held in *lock.
int OpenEngine(const Arguments& args, std::unique_ptr<Engine>* out,
               PostgresStore::OpenMode mode = PostgresStore::OpenMode::kRunsThisModel,
               std::unique_ptr<AdministrationLock>* lock = nullptr) {
  std::optional<Config> config = LoadConfigOrReport(args);
  if (!config) return kExitUsage;
  std::string connection = args.postgres ? *args.postgres : PostgresConnectionString(*config);
  Status status = Status::Ok();
  if (lock != nullptr) status = AdministrationLock::Acquire(*config, connection, args.command, lock);
  if (status.IsBusy()) {
    std::cerr << "denormd " << args.command << ": " << status.message() << "\n";
    return kExitFailure;
  }
  *out = std::make_unique<Engine>(std::move(*config), connection);
  if (status.ok()) status = (*out)->store.Open(mode);
  if (!status.ok()) {
    if (status.IsInvalidInput() || status.IsStaleConfig()) {
      std::cerr << "denormd " << args.command << ": " << status.message() << "\n";
      return kExitUsage;
    }
    const char* env = std::getenv("DENORMD_POSTGRES");
    const std::string from = args.postgres                    ? "--postgres"
                             : env != nullptr && *env != '\0' ? "$DENORMD_POSTGRES"
                                                              : "store.postgres of " + args.config_path;
    std::cerr << "denormd: cannot open the store ("
              << (connection.empty() ? "libpq defaults" : RedactSecrets(connection)) << ", from "
              << from << "): " << status.message() << "\n"
              << "  (another server: --postgres URL, or $DENORMD_POSTGRES; either overrides "
                 "store.postgres)\n";
    return kExitFailure;
  }
  return kExitOk;
}

int Replay(const Arguments& args) {
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

int RebuildOrVerify(const Arguments& args, bool verify) {
  std::unique_ptr<Engine> engine;
  // rebuild changes the index and may record its model: the lock apply and
  // plan take, before the model is read.
  std::unique_ptr<AdministrationLock> lock;
  if (int code = OpenEngine(args, &engine,
                            verify ? PostgresStore::OpenMode::kRunsThisModel
                                   : PostgresStore::OpenMode::kBuild,
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

int StatusCommand(const Arguments& args) {
  std::unique_ptr<Engine> engine;
  if (int code = OpenEngine(args, &engine, PostgresStore::OpenMode::kInspect)) return code;
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
    Status held = AdministrationLock::IsHeld(
        config, args.postgres ? *args.postgres : PostgresConnectionString(config), &running);
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
  std::cout << "\nstreams (each partition or log: the next offset or line denormd reads, the "
               "end offset Kafka has, and the lag between them; the events applied, stale (not "
               "newer than the stored version) and dead (dead letters)):\n";
  if (summary.positions.empty()) std::cout << "  (none yet)\n";
  for (const StoredPosition& p : summary.positions) {
    // The stored position is the last one applied; the next is +1.
    std::cout << "  " << p.at.source << " partition " << p.at.partition << ": next offset "
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
  if (int code = OpenEngine(args, &engine, PostgresStore::OpenMode::kInspect)) return code;
  const RetentionConfig& retention = engine->config.retention;
  const bool progress = !args.quiet && isatty(STDERR_FILENO);
  auto start = std::chrono::steady_clock::now();
  PruneReport report;
  Status status = engine->store.Prune(
      retention, 10000, &report,
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
  const std::string connection = args.postgres ? *args.postgres : PostgresConnectionString(*config);
  std::unique_ptr<AdministrationLock> lock;
  Status status = AdministrationLock::Acquire(*config, connection, "adopt", &lock);
  std::vector<std::string> adopted;
  PostgresStore store(*config, connection);
  if (status.ok()) status = store.Adopt(&adopted);
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

int Publish(const Arguments& args) {
  std::optional<Config> config = LoadConfigOrReport(args);
  if (!config) return kExitUsage;
  if (!config->kafka) {
    std::cerr << args.config_path << ": `publish` needs source.kafka (brokers, topics)\n";
    return kExitUsage;
  }
  if (args.rest.empty()) {
    std::cerr << "denormd publish: name at least one event log (or - for stdin)\n";
    return kExitUsage;
  }
  std::string topic = args.topic.empty() ? config->kafka->topics.front() : args.topic;
  for (const std::string& path : args.rest) {
    uint64_t published = 0;
    Status status = PublishEventLog(*config->kafka, topic, path, &published);
    if (!status.ok()) {
      std::cerr << "denormd publish: " << path << ": " << status.message() << "\n";
      return kExitFailure;
    }
    std::cout << path << ": " << CountOf(published, "event") << " published to " << topic
              << " at " << config->kafka->brokers << "\n";
  }
  return kExitOk;
}

int Relay(const Arguments& args) {
  std::optional<Config> config = LoadConfigOrReport(args);
  if (!config) return kExitUsage;
  if (!config->feed) {
    std::cerr << args.config_path << ": `relay` needs a feed section (topic or collections)\n";
    return kExitUsage;
  }
  RunOptions options;
  options.postgres = args.postgres ? *args.postgres : PostgresConnectionString(*config);
  options.metrics_port = args.metrics_port;
  options.metrics_address = args.metrics_address;
  return RunRelay(std::move(*config), options);
}

int Test(const Arguments& args) {
  if (args.rest.empty()) {
    std::cerr << "denormd test: name at least one event log (or - for stdin)\n";
    return kExitUsage;
  }
  if (args.update && !args.expect) {
    std::cerr << "denormd test: --update writes the --expect FILE; name it\n";
    return kExitUsage;
  }
  if (args.batch_size && !args.batch_sizes.empty()) {
    std::cerr << "denormd test: give --batch or --batch-size, not both\n";
    return kExitUsage;
  }
  TestCommandOptions options;
  options.logs = args.rest;
  options.expect = args.expect;
  options.update = args.update;
  options.dump = args.dump;
  options.batch_sizes = args.batch_sizes;
  if (args.batch_size) options.batch_sizes = {*args.batch_size};
  options.list_all = args.verbose;
  const bool stdin_log = std::find(options.logs.begin(), options.logs.end(), "-") != options.logs.end();
  if (stdin_log && options.batch_sizes.size() > 1) {
    std::cerr << "denormd test: stdin can be read once: give the log as a file to run it at "
                 "several batch sizes\n";
    return kExitUsage;
  }
  std::optional<Config> config = LoadConfigOrReport(args);
  if (!config) return kExitUsage;
  return RunTestCommand(*config, options, std::cout, std::cerr);
}

// `plan` and `apply`.
int PlanOrApply(const Arguments& args, bool plan) {
  std::optional<Config> config = LoadConfigOrReport(args);
  if (!config) return kExitUsage;
  ReconfigureOptions options;
  options.postgres = args.postgres ? *args.postgres : PostgresConnectionString(*config);
  options.plan_only = plan;
  options.sample = args.sample;
  if (!args.quiet) {
    options.progress = [&args](const std::string& line) {
      Log(LogLevel::kInfo, args.command == "plan" ? "plan" : "apply", {{"step", line}});
    };
  }
  ReconfigureReport report;
  Status status = Reconfigure(*config, options, &report);
  if (!status.ok()) {
    std::cerr << "denormd " << args.command << ": " << status.message() << "\n";
    if (!plan) {
      std::cerr << "  (the store still runs its projections of epoch " << report.from_epoch
                << "; `denormd apply` again starts over)\n";
    }
    return status.IsInvalidInput() ? kExitUsage : kExitFailure;
  }
  std::cout << (args.json ? ReportJson(report, plan) : FormatReport(report, plan, args.config_path));
  if (plan && (report.changes() || !report.had_model)) return kExitChanges;
  return kExitOk;
}

int Run(const Arguments& args) {
  std::optional<Config> config = LoadConfigOrReport(args);
  if (!config) return kExitUsage;
  if (!config->kafka) {
    std::cerr << args.config_path << ": `run` needs source.kafka (brokers, topics, group)\n";
    return kExitUsage;
  }
  RunOptions options;
  options.postgres = args.postgres ? *args.postgres : PostgresConnectionString(*config);
  options.metrics_port = args.metrics_port;
  options.metrics_address = args.metrics_address;
  options.relay = !args.no_relay;
  options.reread_config = [args](std::vector<std::string>* errors) {
    std::vector<ConfigError> found;
    std::optional<Config> config = LoadEffectiveConfig(args, &found);
    for (const ConfigError& error : found) errors->push_back(error.ToString(args.config_path));
    return config;
  };
  return RunDaemon(std::move(*config), options);
}

}  // namespace

int RunCommandLine(const std::vector<std::string>& argv) {
  Arguments args;
  Status parsed = ParseArguments(argv, &args);
  if (args.help || (argv.empty())) {
    std::cout << kUsage;
    return argv.empty() ? kExitUsage : kExitOk;
  }
  if (parsed.ok()) parsed = ReadLogFormatFromEnvironment(&args);
  if (!parsed.ok()) {
    std::cerr << "denormd: " << parsed.message()
              << "\n(denormd --help explains the commands and options)\n";
    return kExitUsage;
  }
  // Until the config is read (which may set them too; LoadConfigOrReport).
  if (args.verbose) SetLogLevel(LogLevel::kDebug);
  if (args.quiet) SetLogLevel(LogLevel::kWarn);
  if (args.log_format) SetLogFormat(*args.log_format);
  const std::string& c = args.command;
  bool known = c == "run" || c == "replay" || c == "rebuild" || c == "verify" || c == "status" ||
               c == "check" || c == "publish" || c == "test" || c == "prune" || c == "relay" ||
               c == "plan" || c == "apply" || c == "adopt";
  if (!known) {
    std::cerr << "denormd: " << (c.empty() ? "no command given" : "unknown command \"" + c + "\"")
              << " (expected run, relay, replay, rebuild, verify, status, check, plan, apply, "
                 "adopt, prune, publish or test; see --help)\n";
    return kExitUsage;
  }
  if (c != "test" && (args.expect || args.update || args.dump || !args.batch_sizes.empty())) {
    std::cerr << "denormd " << c << ": --expect, --update, --dump and --batch are options of "
                 "`denormd test`\n";
    return kExitUsage;
  }
  if (args.config_path.empty()) {
    std::cerr << "denormd " << c << ": -c CONFIG is required (see --help)\n";
    return kExitUsage;
  }
  if ((c == "run" || c == "relay" || c == "status" || c == "check" || c == "prune" ||
       c == "plan" || c == "apply" || c == "adopt") &&
      !args.rest.empty()) {
    std::cerr << "denormd " << c << ": unexpected argument \"" << args.rest[0] << "\"\n";
    return kExitUsage;
  }
  if (c == "check") return Check(args);
  if (c == "replay") return Replay(args);
  if (c == "rebuild") return RebuildOrVerify(args, /*verify=*/false);
  if (c == "verify") return RebuildOrVerify(args, /*verify=*/true);
  if (c == "status") return StatusCommand(args);
  if (c == "publish") return Publish(args);
  if (c == "relay") return Relay(args);
  if (c == "prune") return PruneCommand(args);
  if (c == "adopt") return AdoptCommand(args);
  if (c == "test") return Test(args);
  if (c == "plan") return PlanOrApply(args, /*plan=*/true);
  if (c == "apply") return PlanOrApply(args, /*plan=*/false);
  return Run(args);
}

}  // namespace denormd
