// The wall clock as denormd stores it: seconds since the Unix epoch, as a double
// (the unit of captured_at, updated_at and the age metrics); and the steady
// clock's milliseconds, for deadlines.
#ifndef DENORMD_COMMON_CLOCK_H_
#define DENORMD_COMMON_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace denormd {

// Seconds since the Unix epoch, with sub-second precision, from the system clock
// (it can step; use std::chrono::steady_clock for durations).
inline double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Milliseconds of the steady clock (never steps; only differences mean
// anything): for deadlines and the age of a last sign of progress.
inline int64_t SteadyMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace denormd

#endif  // DENORMD_COMMON_CLOCK_H_
