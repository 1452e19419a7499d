// `denormd run`: the long-running Kafka consumer; `denormd relay`: the change
// feed's relay alone.
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
  bool relay = true;                         // run: also run the feed's relay (when a feed is configured)
};

// Runs until SIGTERM/SIGINT; returns the process exit code.
int RunDaemon(Config config, const RunOptions& options);

// `denormd relay`: only the change feed's relay (daemon/relay.h), until
// SIGTERM/SIGINT; returns the process exit code. The config must have a feed.
int RunRelay(Config config, const RunOptions& options);

}  // namespace denormd

#endif  // DENORMD_DAEMON_RUN_H_
