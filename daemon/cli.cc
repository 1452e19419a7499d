#include "daemon/cli.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "common/log.h"
#include "daemon/command_line.h"

namespace denormd {

namespace {

constexpr const char* kUsageHead = R"(denormd - keeps denormalized read documents exactly right as normalized data changes

Usage: denormd COMMAND -c CONFIG [OPTIONS] [ARGS]
)";

// After the commands.
constexpr const char* kUsageTail = R"(
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
  --json                   plan, apply, advise: the report as one JSON object on stdout
  --sample F               plan: build only this fraction of the documents (0 < F <= 1)
                           and extrapolate the counts and the time (default 1: exact);
                           advise: read only this fraction of the entities and
                           documents (by id hash) and scale the counts (estimates)
  --report FILE            advise: also write the report as one HTML page with
                           histograms (self-contained: open it in any browser)
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
    } else if (is("--report")) {
      if (!value(&v) || v.empty()) return Status::InvalidInput("--report needs a file");
      out->report = v;
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

// --help: the head, the commands from Commands(), the options and the rest.
std::string Usage() {
  std::string out = kUsageHead;
  out += "\nCommands:\n";
  for (const Command& command : Commands()) {
    std::string head = std::string(command.name) +
                       (*command.operands ? std::string(" ") + command.operands : "");
    head.resize(std::max<size_t>(head.size() + 1, 25), ' ');
    const std::string summary = command.summary;
    for (size_t start = 0, line = 0; start <= summary.size(); ++line) {
      size_t end = std::min(summary.find('\n', start), summary.size());
      out += "  " + (line == 0 ? head : std::string(25, ' ')) + summary.substr(start, end - start) + "\n";
      start = end + 1;
    }
  }
  return out + kUsageTail;
}

// "run, relay, ... or test": every command's name.
std::string CommandNames() {
  std::string out;
  const std::vector<Command>& commands = Commands();
  for (size_t i = 0; i < commands.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == commands.size() ? " or " : ", ") + std::string(commands[i].name);
  }
  return out;
}

}  // namespace

int RunCommandLine(const std::vector<std::string>& argv) {
  Arguments args;
  Status parsed = ParseArguments(argv, &args);
  if (args.help || (argv.empty())) {
    std::cout << Usage();
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
  const Command* command = FindCommand(c);
  if (command == nullptr) {
    std::cerr << "denormd: " << (c.empty() ? "no command given" : "unknown command \"" + c + "\"")
              << " (expected " << CommandNames() << "; see --help)\n";
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
  if (*command->operands == '\0' && !args.rest.empty()) {
    std::cerr << "denormd " << c << ": unexpected argument \"" << args.rest[0] << "\"\n";
    return kExitUsage;
  }
  return command->run(args);
}

}  // namespace denormd
