// The commands about the config and the model: check, plan, apply, test.
#include <algorithm>
#include <iostream>

#include "common/log.h"
#include "daemon/apply.h"
#include "daemon/cli.h"
#include "daemon/command_line.h"
#include "daemon/test_command.h"

namespace denormd {

int CheckCommand(const Arguments& args) {
  std::optional<Config> config = LoadConfigOrReport(args);
  if (!config) return kExitUsage;
  std::cout << args.config_path << ": ok: " << config->entities.size() << " entity types, "
            << config->projections.size() << " projections into "
            << config->CollectionNames().size()
            << " collections in schema " << config->store.schema << "\n";
  return kExitOk;
}

int TestCommand(const Arguments& args) {
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

namespace {

// `plan` and `apply`.
int PlanOrApply(const Arguments& args, bool plan) {
  std::optional<Config> config = LoadConfigOrReport(args);
  if (!config) return kExitUsage;
  ReconfigureOptions options;
  options.postgres = ConnectionOf(args, *config);
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

}  // namespace

int PlanCommand(const Arguments& args) { return PlanOrApply(args, /*plan=*/true); }
int ApplyCommand(const Arguments& args) { return PlanOrApply(args, /*plan=*/false); }

}  // namespace denormd
