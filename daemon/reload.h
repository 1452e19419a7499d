// What a reload (SIGHUP to `denormd run`) may change in a running daemon.
//
// Live: batch.max_events, batch.max_delay_ms, batch.max_event_bytes,
// retention.* (the next prune uses them), log.level and log.format; they
// take effect from the next batch. Everything
// else (source, store, entities, projections) is built into the running
// engine, the consumer or the stored documents: it needs a restart, and a
// changed model (entities, projections) `denormd apply` instead, which the
// running instances follow by themselves. A reload is all or nothing: when
// anything needs either, nothing is applied and the daemon runs on with the
// configuration it had. The running projections are the store's (after an
// apply, not the file's): a file that still has the old ones is refused.
#ifndef DENORMD_DAEMON_RELOAD_H_
#define DENORMD_DAEMON_RELOAD_H_

#include <string>
#include <vector>

#include "config/config.h"

namespace denormd {

struct ReloadDecision {
  std::vector<std::string> live;           // changed settings a reload applies
  std::vector<std::string> needs_restart;  // changed settings it refuses
  bool needs_apply = false;          // entities or a projection are among the refused
  bool needs_other_restart = false;  // and something else too
  bool accepted() const { return needs_restart.empty(); }
};

// Compares the configuration in effect with the file read again (both with
// the same command-line and environment overrides; ConfigChanges).
ReloadDecision DecideReload(const Config& running, const Config& fresh);

// What an operator must do about a refused reload: "a restart",
// "`denormd apply`" or "`denormd apply` and a restart".
std::string RefusedReloadRemedy(const ReloadDecision& decision);

// Makes `log` the process's log level and format.
void ApplyLogConfig(const LogConfig& log);

// "a,b,c"; "none" when empty.
std::string JoinSettings(const std::vector<std::string>& settings);

}  // namespace denormd

#endif  // DENORMD_DAEMON_RELOAD_H_
