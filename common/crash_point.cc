#include "common/crash_point.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/log.h"

namespace denormd {

namespace {

struct CrashPlan {
  CrashPlan() {
    const char* at = std::getenv("DENORMD_CRASH_AT");
    if (at == nullptr || *at == '\0') return;
    point = at;
    const char* after = std::getenv("DENORMD_CRASH_AFTER");
    if (after != nullptr && *after != '\0') pass = std::max(1L, std::strtol(after, nullptr, 10));
  }
  std::string point;  // "" = inert
  long pass = 1;
  std::atomic<long> seen{0};
};

CrashPlan& Plan() {
  static CrashPlan plan;
  return plan;
}

}  // namespace

void CrashPoint(const char* name) {
  CrashPlan& plan = Plan();
  if (plan.point.empty() || plan.point != name) return;
  if (plan.seen.fetch_add(1) + 1 != plan.pass) return;
  Log(LogLevel::kWarn, "crash_point", {{"point", name}, {"pass", static_cast<int64_t>(plan.pass)}});
  kill(getpid(), SIGKILL);
  _exit(137);
}

}  // namespace denormd
