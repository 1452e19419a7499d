// The denormd command line: parses arguments and runs one command.
#ifndef DENORMD_DAEMON_CLI_H_
#define DENORMD_DAEMON_CLI_H_

#include <string>
#include <vector>

namespace denormd {

// Exit codes.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;      // a command failed, or verify found differences
constexpr int kExitUsage = 2;        // bad arguments or a bad config
constexpr int kExitChanges = 3;      // plan: applying the config would change the store

// Runs `denormd ARGS...` (args excludes the program name). Writes results to
// stdout and diagnostics to stderr; returns the exit code.
int RunCommandLine(const std::vector<std::string>& args);

}  // namespace denormd

#endif  // DENORMD_DAEMON_CLI_H_
