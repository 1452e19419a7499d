// `denormd test`: applies event logs in memory (RunInMemory: no PostgreSQL,
// no Kafka; the config's store and source are never contacted) and checks the
// documents they make: prints them (--dump), compares them with an
// expected-documents file (--expect; DiffDocumentSets), rewrites that file
// (--update), and runs the logs at several batch sizes, which must all give
// the same result (--batch). For users' CI and for our docs' examples.
#ifndef DENORMD_DAEMON_TEST_COMMAND_H_
#define DENORMD_DAEMON_TEST_COMMAND_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "config/config.h"
#include "daemon/memory_run.h"

namespace denormd {

struct TestCommandOptions {
  std::vector<std::string> logs;       // event logs, applied in order; "-" is stdin
  std::optional<std::string> expect;   // the expected-documents file
  bool update = false;                 // write `expect` from the result
  bool dump = false;                   // print the result on `out`
  std::vector<size_t> batch_sizes;     // each >= 1; empty: the config's batch.max_events
  bool list_all = false;               // every difference (else the first 100)
  // Runs the logs at one batch size; tests may put a fake in.
  std::function<Status(const Config& config, const std::vector<std::string>& logs,
                       size_t batch_size, MemoryRun* out)>
      run_in_memory = RunInMemory;
};

// Runs the command with a validated config. Writes the dump (if asked) to
// `out`, and the report — dead letters with their line and reason, a summary,
// the differences — to `out`, or to `err` when dumping, so that the dump
// alone is on `out`. Returns 0 when the result matches (and every batch size
// agrees), 1 on a difference, 2 on a usage error (a log or expected file
// that cannot be read).
int RunTestCommand(const Config& config, const TestCommandOptions& options, std::ostream& out,
                   std::ostream& err);

}  // namespace denormd

#endif  // DENORMD_DAEMON_TEST_COMMAND_H_
