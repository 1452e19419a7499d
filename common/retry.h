// The pause before retrying work that failed for a reason that may pass (the
// store away, a deadlock): one formula for every retry loop of denormd.
#ifndef DENORMD_COMMON_RETRY_H_
#define DENORMD_COMMON_RETRY_H_

#include <algorithm>

namespace denormd {

// Milliseconds to wait before retry `attempt` (1, 2, ...): 200 ms doubling to
// at most 5 s. Safe for any attempt number (the shift is capped).
inline int RetryBackoffMs(int attempt) {
  return std::min(5000, 100 << std::clamp(attempt, 1, 6));
}

}  // namespace denormd

#endif  // DENORMD_COMMON_RETRY_H_
