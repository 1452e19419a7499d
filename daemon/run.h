// `denormd run`: the long-running Kafka consumer (and the change feed's
// relay, when a feed is configured); `denormd relay`: the relay alone.
//
// Lifecycle, as a systemd Type=notify service expects it (the messages are
// ServiceNotifier's, sent only when $NOTIFY_SOCKET is set):
//   - start: opens the store, waiting out an unreachable PostgreSQL (each
//     attempt: EXTEND_TIMEOUT_USEC= and STATUS=waiting for PostgreSQL...),
//     subscribes to the topics, then READY=1;
//   - running: WATCHDOG=1 from the batch loop (polls, commits, retry pauses)
//     and from waits for the store, at least every WATCHDOG_USEC/2;
//   - SIGHUP: between batches, RELOADING=1, the config file read again and
//     what may change live applied (daemon/reload.h), then READY=1;
//   - SIGTERM/SIGINT: the batch in hand finished and committed, STOPPING=1,
//     exit 0.
#ifndef DENORMD_DAEMON_RUN_H_
#define DENORMD_DAEMON_RUN_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"

namespace denormd {

// Reads the configuration again for a reload, with the same command-line and
// environment overrides as at start. On failure: nullopt, and *errors holds
// every problem, one line each ("FILE:LINE:COLUMN: WHERE: MESSAGE").
using ConfigReader = std::function<std::optional<Config>(std::vector<std::string>* errors)>;

struct RunOptions {
  std::string postgres;                      // connection string
  int metrics_port = 0;                      // 0 = no HTTP endpoint
  std::string metrics_address = "127.0.0.1";
  bool relay = true;                         // run: also run the feed's relay (when a feed is configured)
  ConfigReader reread_config;                // empty: SIGHUP keeps the config
};

// Runs until SIGTERM/SIGINT; returns the process exit code.
int RunDaemon(Config config, const RunOptions& options);

// `denormd relay`: only the change feed's relay (daemon/relay.h), until
// SIGTERM/SIGINT; returns the process exit code. The config must have a feed.
int RunRelay(Config config, const RunOptions& options);

}  // namespace denormd

#endif  // DENORMD_DAEMON_RUN_H_
