// denormd: the executable. Everything else lives in denormd_core.
#include <string>
#include <vector>

#include "daemon/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return denormd::RunCommandLine(args);
}
