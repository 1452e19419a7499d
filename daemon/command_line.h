// What the command-line front end (daemon/cli.cc) shares with the commands:
// the parsed arguments, the one table of commands, and the steps most
// commands begin with (the effective config, an opened store).
//
// A command is a function of the parsed arguments returning the process's
// exit code (daemon/cli.h); it writes its results to stdout and its
// diagnostics to stderr. Adding one: its function in the file of its family
// (commands_model.cc: the config and the model; commands_store.cc: a store's
// data; commands_kafka.cc: what talks to Kafka), its line in Commands()
// (daemon/commands.cc), its paragraph in docs/denormd.1 and its line in the
// README's command list (tests/daemon/command_table_test.cc checks both).
#ifndef DENORMD_DAEMON_COMMAND_LINE_H_
#define DENORMD_DAEMON_COMMAND_LINE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "config/config.h"
#include "daemon/engine.h"
#include "projections/store_admin.h"

namespace denormd {

// The command line, parsed (daemon/cli.cc); each command reads the options
// it has and ignores the rest.
struct Arguments {
  std::string command;
  std::string config_path;
  std::optional<std::string> postgres;
  std::optional<size_t> batch_size;
  int metrics_port = 0;
  std::string metrics_address = "127.0.0.1";
  std::string topic;
  bool no_relay = false;
  bool json = false;     // plan, apply, advise
  std::string report;    // advise: the HTML page to write
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


// One command of `denormd COMMAND`.
struct Command {
  const char* name;      // as typed: "verify"
  const char* operands;  // after the name in --help: "[PROJECTION...]"; "" = takes none
  const char* summary;   // --help's text, lines of at most 62 characters
  int (*run)(const Arguments& args);
};

// Every command, in --help's order: the one list the front end dispatches
// through and prints.
const std::vector<Command>& Commands();

// The command named `name`, or null.
const Command* FindCommand(const std::string& name);

// The configuration a command runs with: the file, validated, then the
// environment and the command line on top of it. Reading it again (a
// reload) gives the same overrides.
std::optional<Config> LoadEffectiveConfig(const Arguments& args, std::vector<ConfigError>* errors);

// LoadEffectiveConfig, its errors printed; the process logs as it says.
std::optional<Config> LoadConfigOrReport(const Arguments& args);

// Opens the engine the commands that use the database share: the config,
// its plan and the store, opened. Returns an exit code (kExitOk on success).
// With `lock`, the schema's administration lock is taken first (before the
// store's model is read), and held in *lock.
int OpenEngine(const Arguments& args, std::unique_ptr<Engine>* out,
               StoreAdministration::OpenMode mode = StoreAdministration::OpenMode::kRunsThisModel,
               std::unique_ptr<AdministrationLock>* lock = nullptr);

// The PostgreSQL server a command uses: --postgres, else $DENORMD_POSTGRES,
// else the config's store.postgres.
std::string ConnectionOf(const Arguments& args, const Config& config);

double SecondsSince(std::chrono::steady_clock::time_point start);

// The commands (their summaries: Commands()).
// commands_model.cc
int CheckCommand(const Arguments& args);
int PlanCommand(const Arguments& args);
int ApplyCommand(const Arguments& args);
int TestCommand(const Arguments& args);
// commands_store.cc (advise: commands_advise.cc)
int ReplayCommand(const Arguments& args);
int RebuildCommand(const Arguments& args);
int VerifyCommand(const Arguments& args);
int StatusCommand(const Arguments& args);
int PruneCommand(const Arguments& args);
int AdoptCommand(const Arguments& args);
int AdviseCommand(const Arguments& args);
// commands_kafka.cc
int RunCommand(const Arguments& args);
int RelayCommand(const Arguments& args);
int PublishCommand(const Arguments& args);

}  // namespace denormd

#endif  // DENORMD_DAEMON_COMMAND_LINE_H_
