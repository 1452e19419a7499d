// Crash points: named places where a test can make the process die at once
// (SIGKILL, as kill -9 would), to prove that a crash exactly there loses and
// repeats nothing (tests/daemon/feed_kafka_test.cc). Inert unless the
// environment asks:
//   DENORMD_CRASH_AT=<name>      the point to die at
//   DENORMD_CRASH_AFTER=<n>      die on its n-th pass (default 1)
// Reading the environment happens once; an inert point costs one branch.
#ifndef DENORMD_COMMON_CRASH_POINT_H_
#define DENORMD_COMMON_CRASH_POINT_H_

namespace denormd {

// Dies with SIGKILL when `name` is the configured point and this is its
// configured pass. Thread-safe.
void CrashPoint(const char* name);

}  // namespace denormd

#endif  // DENORMD_COMMON_CRASH_POINT_H_
