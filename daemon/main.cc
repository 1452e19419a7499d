// denormd: the executable. Everything else lives in denormd_core.
#include <sys/resource.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/process.h"
#include "common/text.h"
#include "daemon/cli.h"

namespace {

// The soft open-files limit is often 1,024 while the hard one is far higher.
// The metrics server may hold up to 1,024 connections beside librdkafka's and
// PostgreSQL's sockets, so take what the hard limit allows (up to 65,536).
void RaiseOpenFilesLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  rlim_t target = 65536;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < target) target = limit.rlim_max;
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= target) return;
  limit.rlim_cur = target;
  setrlimit(RLIMIT_NOFILE, &limit);  // best effort: the metrics server copes with EMFILE
}

}  // namespace

int main(int argc, char** argv) {
  denormd::ConfigureAllocator(std::getenv("GLIBC_TUNABLES"));
  RaiseOpenFilesLimit();
  if (argc > 0) denormd::SetCommandName(argv[0]);
  std::vector<std::string> args(argv + 1, argv + argc);
  return denormd::RunCommandLine(args);
}
