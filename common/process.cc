#include "common/process.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <malloc.h>
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

bool ConfigureAllocator(const char* glibc_tunables, const AllocatorSettings& settings) {
  if (glibc_tunables != nullptr && std::strstr(glibc_tunables, "glibc.malloc.") != nullptr) {
    return false;
  }
  // Each call fixes its threshold, which also ends glibc's raising of it.
  return mallopt(M_ARENA_MAX, settings.arena_max) == 1 &&
         mallopt(M_TRIM_THRESHOLD, settings.trim_threshold_bytes) == 1 &&
         mallopt(M_MMAP_THRESHOLD, settings.mmap_threshold_bytes) == 1;
}

}  // namespace denormd
