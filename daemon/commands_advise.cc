// `denormd advise`: what the model costs on the stored data, and what to
// change (projections/advice.h measures, daemon/advise_report.h prints).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "common/text.h"
#include "daemon/advise_report.h"
#include "daemon/cli.h"
#include "daemon/command_line.h"
#include "projections/advice.h"

namespace denormd {

int AdviseCommand(const Arguments& args) {
  std::unique_ptr<Engine> engine;
  if (int code = OpenEngine(args, &engine, StoreAdministration::OpenMode::kInspect)) return code;
  const Config& config = engine->config;
  AdviceOptions options;
  options.sample = args.sample;
  options.thresholds = config.limits;
  const bool progress = !args.quiet && isatty(STDERR_FILENO);
  if (progress) {
    options.on_page = [](const std::string& what, uint64_t read) {
      std::fprintf(stderr, "\r%s %s read          ", FormatCount(read).c_str(), what.c_str());
    };
  }
  ModelAdvice advice;
  Status status = AdviseModel(engine->plan, &engine->store, options, &advice);
  if (progress) std::fprintf(stderr, "\n");
  if (!status.ok()) {
    std::cerr << "denormd advise: " << status.message() << "\n";
    return status.IsInvalidInput() ? kExitUsage : kExitFailure;
  }
  if (engine->store.stored_model().fingerprint != ModelFingerprint(config)) {
    std::cerr << "denormd advise: the store runs other projections than " << args.config_path
              << ": the fan-out is this file's, measured on the stored source; the document "
                 "sizes are of the documents stored (`"
              << CommandName() << " plan -c " << args.config_path << "` shows the difference)\n";
  }
  if (!args.report.empty()) {
    std::ofstream page(args.report, std::ios::binary | std::ios::trunc);
    page << AdviceHtml(advice, config.store.schema);
    page.close();
    if (!page) {
      std::cerr << "denormd advise: cannot write the report " << args.report << ": "
                << std::strerror(errno) << "\n";
      return kExitFailure;
    }
    if (!args.quiet) std::cerr << "denormd advise: the report is in " << args.report << "\n";
  }
  std::cout << (args.json ? AdviceJson(advice, config.store.schema)
                          : FormatAdvice(advice, config.store.schema));
  return kExitOk;
}

}  // namespace denormd
