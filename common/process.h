// Facts about the running process that the commands report.
#ifndef DENORMD_COMMON_PROCESS_H_
#define DENORMD_COMMON_PROCESS_H_

#include <cstdint>

namespace denormd {

// The process's peak resident set size so far, in KiB (/proc/self/status VmHWM).
int64_t PeakRssKib();

// glibc's malloc as denormd sets it, before any thread starts: at most two
// arenas (librdkafka's threads allocate the messages the batch thread frees;
// with an arena each they kept freed memory apart), free memory at the top of
// the heap returned past 8 MiB, and blocks of 1 MiB or more mapped on their
// own (glibc's defaults raise both thresholds after each large free, up to
// 32 and 64 MiB, so a large batch's memory stayed with the process). Measured
// in docs/benchmarks.md ("Memory: the allocator").
struct AllocatorSettings {
  int arena_max = 2;
  int trim_threshold_bytes = 8 << 20;
  int mmap_threshold_bytes = 1 << 20;
};

// Applies `settings` with mallopt and returns true, unless `glibc_tunables`
// (the GLIBC_TUNABLES environment variable, or null) names a glibc.malloc
// setting: then the operator's choice stands and nothing is changed.
bool ConfigureAllocator(const char* glibc_tunables,
                        const AllocatorSettings& settings = AllocatorSettings());

}  // namespace denormd

#endif  // DENORMD_COMMON_PROCESS_H_
