// Facts about the running process that the commands report.
#ifndef DENORMD_COMMON_PROCESS_H_
#define DENORMD_COMMON_PROCESS_H_

#include <cstdint>

namespace denormd {

// The process's peak resident set size so far, in KiB (getrusage ru_maxrss).
int64_t PeakRssKib();

}  // namespace denormd

#endif  // DENORMD_COMMON_PROCESS_H_
