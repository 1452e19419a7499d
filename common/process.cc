#include "common/process.h"

#include <sys/resource.h>

namespace denormd {

int64_t PeakRssKib() {
  struct rusage usage = {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

}  // namespace denormd
