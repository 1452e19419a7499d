#include "daemon/reload.h"

#include "common/log.h"
#include "common/text.h"

namespace denormd {

namespace {

bool ChangesLive(const std::string& setting) {
  // The lanes are the pipeline's connections and threads, made at its start.
  if (setting == "batch.max_lanes") return false;
  return setting.rfind("batch.", 0) == 0 || setting.rfind("retention.", 0) == 0 ||
         setting.rfind("limits.", 0) == 0 ||
         setting.rfind("log.", 0) == 0;
}

}  // namespace

ReloadDecision DecideReload(const Config& running, const Config& fresh) {
  ReloadDecision decision;
  for (std::string& setting : ConfigChanges(running, fresh)) {
    if (ChangesLive(setting)) {
      decision.live.push_back(std::move(setting));
      continue;
    }
    if (setting.rfind("projections.", 0) == 0 || setting == "entities") {
      decision.needs_apply = true;
    } else {
      decision.needs_other_restart = true;
    }
    decision.needs_restart.push_back(std::move(setting));
  }
  return decision;
}

std::string RefusedReloadRemedy(const ReloadDecision& decision) {
  if (!decision.needs_apply) return "a restart";
  // Running instances load the projections `apply` makes current by
  // themselves; the other settings still need a restart.
  return decision.needs_other_restart ? "`denormd apply` and a restart" : "`denormd apply`";
}

void ApplyLogConfig(const LogConfig& log) {
  SetLogLevel(log.level);
  SetLogFormat(log.format);
}

std::string JoinSettings(const std::vector<std::string>& settings) {
  if (settings.empty()) return "none";
  return Joined(settings, ",");
}

}  // namespace denormd
