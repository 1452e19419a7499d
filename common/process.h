// Facts about the running process that the commands report.
#ifndef DENORMD_COMMON_PROCESS_H_
#define DENORMD_COMMON_PROCESS_H_

#include <cstdint>

namespace denormd {

// The process's peak resident set size so far, in KiB (/proc/self/status VmHWM).
int64_t PeakRssKib();

}  // namespace denormd

#endif  // DENORMD_COMMON_PROCESS_H_
