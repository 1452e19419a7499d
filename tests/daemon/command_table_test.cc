// The command table (daemon/commands.cc) is the one list of commands: --help
// prints it and the front end dispatches through it; the README's command
// list and the man page (docs/denormd.1) are written by hand, so this test
// holds them to it: the same commands, each with the operands it takes.
#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "daemon/cli.h"
#include "daemon/command_line.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::ReadFile;
using testing::SourcePath;

// Each command's operands, as the table has them: name -> "FILE...".
std::map<std::string, std::string> TableCommands() {
  std::map<std::string, std::string> out;
  for (const Command& command : Commands()) out[command.name] = command.operands;
  return out;
}

// The README's command list: the fenced block after "## Commands", one
// "denormd NAME -c CONFIG [OPERANDS]  description" line per command.
std::map<std::string, std::string> ReadmeCommands() {
  const std::string readme = ReadFile(SourcePath("README.md"));
  const size_t section = readme.find("\n## Commands\n");
  EXPECT_NE(std::string::npos, section) << "README.md has no \"## Commands\" section";
  const size_t open = readme.find("```\n", section);
  const size_t close = readme.find("```", open + 4);
  std::istringstream block(readme.substr(open + 4, close - open - 4));
  std::map<std::string, std::string> out;
  const std::regex line(R"(^denormd (\w+) +-c CONFIG ?((?:\[?[A-Z]+\.\.\.\]?)?) {2,}\S.*$)");
  for (std::string text; std::getline(block, text);) {
    std::smatch m;
    if (text.rfind("denormd ", 0) != 0) continue;
    EXPECT_TRUE(std::regex_match(text, m, line)) << "README.md command line not understood: " << text;
    if (!m.empty()) out[m[1]] = m[2];
  }
  return out;
}

// The man page's COMMANDS section: a ".TP" then ".B NAME", ".BI NAME \" FILE...\""
// or ".BR NAME \" [\fIPROJECTION\fR...]\"" per command.
std::map<std::string, std::string> ManPageCommands() {
  const std::string page = ReadFile(SourcePath("docs/denormd.1"));
  const size_t section = page.find("\n.SH COMMANDS\n");
  EXPECT_NE(std::string::npos, section) << "docs/denormd.1 has no COMMANDS section";
  const size_t end = page.find("\n.SH ", section + 1);
  std::istringstream lines(page.substr(section, end - section));
  std::map<std::string, std::string> out;
  const std::regex item(R"re(^\.B[IR]? (\w+)(?: "\s*(.*)")?$)re");
  bool after_tp = false;
  for (std::string text; std::getline(lines, text);) {
    if (after_tp) {
      std::smatch m;
      EXPECT_TRUE(std::regex_match(text, m, item)) << "docs/denormd.1: a .TP not followed by a "
                                                       "command: " << text;
      if (!m.empty()) {
        // Font changes out: "[\fIPROJECTION\fR...]" -> "[PROJECTION...]".
        out[m[1]] = std::regex_replace(m[2].str(), std::regex(R"(\\f[IRB])"), "");
      }
    }
    after_tp = text == ".TP";
  }
  return out;
}

TEST(CommandTable, ReadmeListsEveryCommandWithItsOperands) {
  EXPECT_EQ(TableCommands(), ReadmeCommands());
}

TEST(CommandTable, ManPageDescribesEveryCommandWithItsOperands) {
  EXPECT_EQ(TableCommands(), ManPageCommands());
}

TEST(CommandTable, HelpShowsEachCommandOnceInTableOrder) {
  testing::CommandResult help = testing::RunDenormdOffline({"--help"});
  ASSERT_EQ(kExitOk, help.code);
  size_t at = help.out.find("\nCommands:\n");
  ASSERT_NE(std::string::npos, at) << help.out;
  for (const Command& command : Commands()) {
    std::string head = std::string("\n  ") + command.name +
                       (*command.operands ? std::string(" ") + command.operands : "") + " ";
    size_t found = help.out.find(head, at);
    ASSERT_NE(std::string::npos, found) << command.name << " missing or out of order in --help";
    EXPECT_EQ(std::string::npos, help.out.find(head, found + 1)) << command.name << " twice";
    at = found;
  }
}

TEST(CommandTable, CommandWithoutOperandsRefusesOneAndUnknownCommandListsAll) {
  for (const Command& command : Commands()) {
    if (*command.operands != '\0') continue;
    testing::CommandResult r =
        testing::RunDenormdOffline({command.name, "-c", "unused.yaml", "stray"});
    EXPECT_EQ(kExitUsage, r.code) << command.name;
    EXPECT_NE(std::string::npos, r.err.find("unexpected argument \"stray\"")) << r.err;
  }
  testing::CommandResult unknown = testing::RunDenormdOffline({"frobnicate", "-c", "x.yaml"});
  EXPECT_EQ(kExitUsage, unknown.code);
  for (const Command& command : Commands()) {
    EXPECT_NE(std::string::npos, unknown.err.find(command.name)) << unknown.err;
  }
}

}  // namespace
}  // namespace denormd
