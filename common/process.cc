#include "common/process.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include <sys/resource.h>

namespace denormd {

int64_t PeakRssKib() {
  // The kernel's high-water mark of this process's resident set (VmHWM).
  // Not getrusage's ru_maxrss: Linux keeps that across execve, so a denormd
  // started by a large process (a 400 MiB benchmark harness) would report
  // the harness's peak as its own.
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10);
  }
  struct rusage usage = {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

}  // namespace denormd
