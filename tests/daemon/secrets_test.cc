// Secrets never reach an output: a PostgreSQL password (in a URL or a
// key=value connection string) and librdkafka secrets (sasl.password and any
// property whose name says it is a secret) are absent from every command's
// stdout and stderr, from `run`'s log, and from /healthz and /metrics, on
// every path that reports a connection problem.
#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::CommandResult;
using testing::DaemonProcess;
using testing::ReadFile;
using testing::SourcePath;
using testing::WaitUntil;
using testing::WriteTempFile;

constexpr char kSecret[] = "Pw-5ecret-0x7a9";

// denormd `args` with DENORMD_POSTGRES=`postgres` (and Kafka on port 1).
CommandResult RunWith(const std::string& postgres, const std::vector<std::string>& args) {
  return testing::RunDenormdWith(
      {{"DENORMD_POSTGRES", postgres}, {"DENORMD_KAFKA_BROKERS", "127.0.0.1:1"}}, args);
}

// The article config with Kafka properties holding the secret.
std::string ConfigWithKafkaSecrets(const std::string& extra_property) {
  std::string text = ReadFile(SourcePath("tests/data/article/config.yaml"));
  const size_t begin = text.find("  kafka: {");
  const size_t end = text.find('\n', begin);
  text.replace(begin, end - begin + 1,
               std::string("  kafka:\n    brokers: 127.0.0.1:1\n    topics: [t]\n    group: g\n"
                           "    properties:\n      security.protocol: SASL_PLAINTEXT\n"
                           "      sasl.mechanism: PLAIN\n      sasl.username: ann\n"
                           "      sasl.password: ") +
                   kSecret + "\n" + extra_property);
  return WriteTempFile("secrets.yaml", text);
}

const std::vector<std::string> kConnectionStrings = {
    std::string("postgresql://ann:") + kSecret + "@127.0.0.1:1/library",
    std::string("host=127.0.0.1 port=1 user=ann dbname=library password=") + kSecret,
    std::string("postgresql://ann:") + kSecret + "@127.0.0.1:notaport/library",
    std::string("postgresql://ann:") + kSecret + "@127.0.0.1:1/library?sslmode=bogus",
};

TEST(Secrets, NoCommandPrintsThePostgresPassword) {
  const std::string config = ConfigWithKafkaSecrets("");
  const std::string log = SourcePath("tests/data/article/events.jsonl");
  for (const std::string& postgres : kConnectionStrings) {
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{"status", "-c", config},
                                               {"verify", "-c", config},
                                               {"rebuild", "-c", config},
                                               {"prune", "-c", config},
                                               {"replay", "-c", config, log},
                                               {"check", "-c", config},
                                               {"status", "-c", config, "--postgres", postgres}}) {
      const CommandResult r = RunWith(postgres, args);
      const std::string all = r.out + r.err;
      EXPECT_EQ(std::string::npos, all.find(kSecret)) << args[0] << " with " << postgres << ":\n"
                                                      << all;
      if (args[0] != "check") {
        EXPECT_NE(0, r.code) << args[0] << ":\n" << all;
      }
    }
  }
}

TEST(Secrets, RunKeepsThemOutOfItsLogAndHttpAnswers) {
  const std::string config = ConfigWithKafkaSecrets("");
  for (const std::string& postgres : kConnectionStrings) {
    const int port = 25000 + getpid() % 1000;
    DaemonProcess daemon({"run", "-c", config, "--metrics-port", std::to_string(port)}, postgres);
    daemon.Start();
    std::string health, metrics;
    // It waits for the store (or gives up on a connection string it cannot
    // parse); either way it has said why by the time /healthz answers 503
    // or it has exited.
    ASSERT_TRUE(WaitUntil(
        [&] {
          if (!daemon.Running()) return true;
          health = testing::HttpGet(port, "/healthz");
          return health.find(" 503 ") != std::string::npos &&
                 daemon.Log().find("store_unavailable") != std::string::npos;
        },
        60))
        << daemon.Log();
    metrics = testing::HttpGet(port, "/metrics");
    if (daemon.Running()) {
      EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
    }
    EXPECT_EQ(std::string::npos, daemon.Log().find(kSecret)) << postgres << ":\n" << daemon.Log();
    EXPECT_EQ(std::string::npos, health.find(kSecret)) << health;
    EXPECT_EQ(std::string::npos, health.find("127.0.0.1")) << health;
    EXPECT_EQ(std::string::npos, metrics.find(kSecret)) << metrics;
  }
}

// A connection string libpq cannot use is a mistake, not an outage: `run`
// fails its start with exit 2 and names the problem (it used to wait for the
// store forever), and the one-shot commands fail the same way.
TEST(Secrets, AConnectionStringLibpqCannotUseFailsTheStart) {
  const std::string config = ConfigWithKafkaSecrets("");
  const std::string secret = std::string(":") + kSecret + "@";
  for (const auto& bad : std::vector<std::pair<std::string, std::string>>{
           {"postgresql://ann" + secret + "127.0.0.1:notaport/library", "notaport"},
           {"postgresql://ann" + secret + "127.0.0.1:1/library?sslmode=bogus", "is none of disable"},
           {std::string("host=a,b port=1,70000 password=") + kSecret, "70000"},
           {std::string("host=a pasword=") + kSecret, "invalid connection option"},
           {std::string("host=a password"), "missing"}}) {
    DaemonProcess daemon({"run", "-c", config}, bad.first);
    daemon.Start();
    ASSERT_TRUE(WaitUntil([&] { return !daemon.Running(); }, 30)) << bad.first << ":\n" << daemon.Log();
    EXPECT_EQ(2, daemon.exit_code()) << daemon.Log();
    EXPECT_NE(std::string::npos, daemon.Log().find("connection string cannot be used")) << daemon.Log();
    EXPECT_NE(std::string::npos, daemon.Log().find(bad.second)) << daemon.Log();
    EXPECT_EQ(std::string::npos, daemon.Log().find(kSecret)) << daemon.Log();
    const CommandResult status = RunWith(bad.first, {"status", "-c", config});
    EXPECT_NE(0, status.code);
    EXPECT_NE(std::string::npos, (status.out + status.err).find(bad.second)) << status.err;
    EXPECT_EQ(std::string::npos, (status.out + status.err).find(kSecret)) << status.err;
  }
}

TEST(Secrets, ARejectedSecretKafkaPropertyIsNamedNotShown) {
  // librdkafka rejects an unknown property; its name says it is a secret.
  const std::string config =
      ConfigWithKafkaSecrets(std::string("      my.api.token: ") + kSecret + "\n");
  for (const std::string command : {"run", "publish"}) {
    std::vector<std::string> args = {command, "-c", config};
    if (std::string(command) == "publish") args.push_back(SourcePath("tests/data/article/events.jsonl"));
    const CommandResult r = RunWith(testing::TestPostgresUrl(), args);
    const std::string all = r.out + r.err;
    EXPECT_EQ(std::string::npos, all.find(kSecret)) << command << ":\n" << all;
    EXPECT_NE(0, r.code) << command << ":\n" << all;
    EXPECT_NE(std::string::npos, all.find("my.api.token")) << command << ":\n" << all;
  }
}

// issue 25: a property value is never printed, whatever its key's name
// (librdkafka quotes some values in its messages).
TEST(Secrets, ARejectedKafkaPropertysValueIsNeverShownWhateverItsName) {
  const std::string config =
      ConfigWithKafkaSecrets(std::string("      plain.looking.setting: ") + kSecret + "\n");
  const CommandResult r = RunWith(testing::TestPostgresUrl(), {"run", "-c", config});
  const std::string all = r.out + r.err;
  EXPECT_NE(0, r.code) << all;
  EXPECT_EQ(std::string::npos, all.find(kSecret)) << all;
  EXPECT_NE(std::string::npos, all.find("plain.looking.setting (value not shown)")) << all;
}

}  // namespace
}  // namespace denormd
