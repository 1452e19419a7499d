// `denormd run`: the long-running Kafka consumer.
#ifndef DENORMD_DAEMON_RUN_H_
#define DENORMD_DAEMON_RUN_H_

#include <string>

#include "common/status.h"
#include "config/config.h"

namespace denormd {

struct RunOptions {
  std::string postgres;                      // connection string
  int metrics_port = 0;                      // 0 = no HTTP endpoint
  std::string metrics_address = "127.0.0.1";
};

// Runs until SIGTERM/SIGINT; returns the process exit code.
int RunDaemon(Config config, const RunOptions& options);

}  // namespace denormd

#endif  // DENORMD_DAEMON_RUN_H_
