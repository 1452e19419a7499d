// `denormd run` as systemd runs it (deploy/systemd/denormd.service), against
// the real PostgreSQL and Kafka and a notification socket the test creates:
// READY=1 once the store is open and the consumer subscribed; WATCHDOG=1
// while idle, while PostgreSQL is away at start-up and during an outage;
// STOPPING=1 on SIGTERM; SIGHUP reloads batch settings and refuses a changed
// projection while consuming on; --log-format json; an outage right after
// `apply` fenced the instance is waited out.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::DaemonProcess;
using testing::NotifyListener;
using testing::RunDenormd;
using testing::SourcePath;
using testing::Sql;
using testing::WaitUntil;

constexpr int kPatience = 180;  // seconds before a wait counts as hung
constexpr uint64_t kArticleEvents = 286;  // lines of events.jsonl
constexpr uint64_t kRandomEvents = 3343;  // lines of events-random.jsonl
// The watchdog interval given to the daemon: WATCHDOG=1 at least every 0.5 s.
constexpr char kWatchdogUsec[] = "1000000";

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Whether a notification message holds the assignment `line` ("READY=1").
bool Says(const std::string& message, const std::string& line) {
  std::istringstream lines(message);
  for (std::string l; std::getline(lines, l);) {
    if (l == line) return true;
  }
  return false;
}

uint64_t Processed(const std::string& schema, const std::string& url = "") {
  const std::string query =
      "select coalesce(sum(applied + stale + dead), 0) from " + schema + ".positions";
  if (url.empty()) {
    std::vector<std::string> rows = Sql("select to_regclass('" + schema + ".positions') is null");
    if (rows.empty() || rows[0] == "t") return 0;
    rows = Sql(query);
    return rows.empty() ? 0 : std::strtoull(rows[0].c_str(), nullptr, 10);
  }
  const std::string command = "psql -X -q -t -A '" + url + "' -c \"" + query + "\" 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  char buffer[128] = {0};
  const size_t n = fread(buffer, 1, sizeof(buffer) - 1, pipe);
  pclose(pipe);
  buffer[n] = 0;
  return std::strtoull(buffer, nullptr, 10);
}

struct Topic {
  std::string schema;
  std::string config_file;
};

// A fresh schema and topic (one partition) and a config file for both.
Topic SetUpTopic(const std::string& brokers) {
  Topic t;
  t.schema = testing::TestSchemaName();
  const std::string topic = t.schema + "_" + std::to_string(getpid());
  testing::LoadTestConfig("tests/data/article/config.yaml", t.schema);  // drops the schema
  t.config_file = testing::WriteKafkaArticleConfig(t.schema, brokers, topic);
  std::string output;
  const std::string port = brokers.substr(brokers.rfind(':') + 1);
  EXPECT_EQ(0, testing::RunScript("kafka.sh", {"topic-create", topic, "1"},
                                  {{"DENORMD_KAFKA_PORT", port}}, &output));
  return t;
}

void Publish(const Topic& t, const std::string& log) {
  std::string output;
  ASSERT_EQ(0, RunDenormd({"publish", "-c", t.config_file, log}, &output)) << output;
}

// Receives until a message `match`es; false when the daemon exits first or
// kPatience passes (a bound that only stops a hung test).
bool Await(NotifyListener& manager, DaemonProcess& daemon,
           const std::function<bool(const std::string&)>& match) {
  for (int second = 0; second < kPatience; ++second) {
    if (manager.ReceiveUntil(match, 1)) return true;
    if (!daemon.Running()) return manager.ReceiveUntil(match, 1);  // sent before it exited
  }
  return false;
}

// Receives until a message holds the assignment `line`.
bool AwaitLine(NotifyListener& manager, DaemonProcess& daemon, const std::string& line) {
  return Await(manager, daemon, [&](const std::string& m) { return Says(m, line); });
}

// Drops what is queued (a datagram queue holds only a few messages, so the
// daemon drops what does not fit while the test looks elsewhere), then
// receives until `n` more WATCHDOG=1 messages arrived.
bool ReceiveKeepAlives(NotifyListener& manager, DaemonProcess& daemon, int n) {
  manager.Drain();
  int seen = 0;
  return Await(manager, daemon,
               [&](const std::string& m) { return Says(m, "WATCHDOG=1") && ++seen >= n; });
}

void WriteFile(const std::string& path, const std::string& text) {
  FILE* file = std::fopen(path.c_str(), "w");
  ASSERT_NE(nullptr, file) << path;
  std::fwrite(text.data(), 1, text.size(), file);
  std::fclose(file);
}

void ExpectEveryLineIsAJsonLogLine(const std::string& log) {
  std::istringstream lines(log);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    rapidjson::Document document;
    document.Parse<rapidjson::kParseValidateEncodingFlag>(line.c_str());
    ASSERT_FALSE(document.HasParseError()) << line;
    ASSERT_TRUE(document.IsObject()) << line;
    for (const char* key : {"ts", "level", "event"}) {
      ASSERT_TRUE(document.HasMember(key) && document[key].IsString()) << key << " in " << line;
    }
  }
  EXPECT_GT(count, 3) << log;
}

TEST(ServiceDaemon, ReadyAfterStoreAndSubscriptionThenWatchdogThenStoppingOnSigterm) {
  Topic t = SetUpTopic(testing::TestKafkaBootstrap());
  Publish(t, SourcePath("tests/data/article/events.jsonl"));
  NotifyListener manager(/*abstract=*/true);
  DaemonProcess daemon({"run", "-c", t.config_file, "--log-format", "json"}, testing::TestPostgresUrl());
  daemon.SetEnv("NOTIFY_SOCKET", manager.path());
  daemon.SetEnv("WATCHDOG_USEC", kWatchdogUsec);
  daemon.Start();

  ASSERT_TRUE(AwaitLine(manager, daemon, "READY=1"))
      << daemon.Log();
  // By then the store is open (its tables exist) and the consumer subscribed.
  const std::string at_ready = daemon.Log();
  EXPECT_TRUE(Has(at_ready, "\"event\":\"kafka_subscribed\"")) << at_ready;
  EXPECT_TRUE(Has(at_ready, "\"event\":\"daemon_started\"")) << at_ready;
  EXPECT_EQ(std::vector<std::string>{"f"},
            Sql("select to_regclass('" + t.schema + ".positions') is null"));
  EXPECT_TRUE(Has(manager.received().back(), "STATUS=consuming ")) << manager.received().back();

  ASSERT_TRUE(WaitUntil([&] { return Processed(t.schema) >= kArticleEvents; }, kPatience))
      << daemon.Log();
  // Idle now: the watchdog is fed from the polls.
  ASSERT_TRUE(ReceiveKeepAlives(manager, daemon, 4)) << daemon.Log();

  manager.Drain();  // room in the queue for what follows
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  EXPECT_TRUE(manager.ReceiveUntil([](const std::string& m) { return Says(m, "STOPPING=1"); }, 5))
      << daemon.Log();
  ExpectEveryLineIsAJsonLogLine(daemon.Log());
}

TEST(ServiceDaemon, WaitsForPostgresAtStartAndThroughAnOutageWithTheWatchdogFed) {
  // A PostgreSQL of the test's own, not started yet.
  const int port = 24000 + getpid() % 1000;
  const std::string state =
      std::string(::testing::TempDir()) + "/denormd-svc-pg-" + std::to_string(getpid());
  const std::vector<std::pair<std::string, std::string>> env = {
      {"DENORMD_STATE_DIR", state}, {"DENORMD_PG_PORT", std::to_string(port)}};
  struct Cleanup {
    std::vector<std::pair<std::string, std::string>> env;
    std::string state;
    ~Cleanup() {
      std::string ignored;
      testing::RunScript("postgres.sh", {"stop"}, env, &ignored);
      std::system(("rm -rf '" + state + "'").c_str());
    }
  } cleanup{env, state};
  const std::string url = "postgresql://postgres@127.0.0.1:" + std::to_string(port) + "/denorm";

  Topic t = SetUpTopic(testing::TestKafkaBootstrap());
  const std::string all = testing::ReadFile(SourcePath("tests/data/article/events-random.jsonl"));
  const size_t middle = all.find('\n', all.size() / 2) + 1;
  Publish(t, testing::WriteTempFile("first.jsonl", all.substr(0, middle)));
  const uint64_t first_count = std::count(all.begin(), all.begin() + middle, '\n');

  NotifyListener manager;
  DaemonProcess daemon({"run", "-c", t.config_file, "--batch-size", "100"}, url);
  daemon.SetEnv("NOTIFY_SOCKET", manager.path());
  daemon.SetEnv("WATCHDOG_USEC", kWatchdogUsec);
  daemon.Start();

  // Start-up without PostgreSQL: more time asked for, the watchdog fed.
  ASSERT_TRUE(Await(manager, daemon, [](const std::string& m) {
    return Has(m, "EXTEND_TIMEOUT_USEC=") && Has(m, "STATUS=waiting for PostgreSQL: attempt ");
  })) << daemon.Log();
  ASSERT_TRUE(ReceiveKeepAlives(manager, daemon, 4)) << daemon.Log();
  for (const std::string& m : manager.received()) EXPECT_FALSE(Says(m, "READY=1")) << m;

  std::string output;
  ASSERT_EQ(0, testing::RunScript("postgres.sh", {"start"}, env, &output));
  ASSERT_TRUE(AwaitLine(manager, daemon, "READY=1"))
      << daemon.Log();
  ASSERT_TRUE(WaitUntil([&] { return Processed(t.schema, url) >= first_count; }, kPatience))
      << daemon.Log();

  // An outage while running: batches retried, the watchdog still fed.
  ASSERT_EQ(0, testing::RunScript("postgres.sh", {"stop"}, env, &output));
  Publish(t, testing::WriteTempFile("second.jsonl", all.substr(middle)));
  ASSERT_TRUE(WaitUntil([&] { return Has(daemon.Log(), "event=batch_retry"); }, kPatience))
      << daemon.Log();
  ASSERT_TRUE(ReceiveKeepAlives(manager, daemon, 4)) << daemon.Log();
  EXPECT_TRUE(daemon.Running()) << daemon.Log();

  ASSERT_EQ(0, testing::RunScript("postgres.sh", {"start"}, env, &output));
  ASSERT_TRUE(WaitUntil([&] { return Processed(t.schema, url) >= kRandomEvents; }, kPatience))
      << daemon.Log();
  manager.Drain();  // room in the queue for what follows
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  EXPECT_TRUE(manager.ReceiveUntil([](const std::string& m) { return Says(m, "STOPPING=1"); }, 5))
      << daemon.Log();
}

// Runs `sql` with psql against `url`; true when it succeeded.
bool Psql(const std::string& url, const std::string& sql) {
  return std::system(("psql -X -q '" + url + "' -c \"" + sql + "\" >/dev/null 2>&1").c_str()) == 0;
}

// After `apply` fences a running instance, the instance reads the store's new
// model on a new connection. A store that cannot be reached just then (here:
// its database closed to new connections, while the daemon's own connection,
// on which the fenced batch failed, stays open) is waited out like any other
// outage, and the instance then runs the new model. Its /metrics port stays
// open through the pipeline's restart (503 while the store is away), and its
// counters go on from where they were.
TEST(ServiceDaemon, AStoreAwayWhenTheNewModelIsReadIsWaitedOut) {
  const std::string admin = testing::TestPostgresUrl();
  const std::string database = "denormd_fenced_" + std::to_string(getpid());
  const std::string url = admin.substr(0, admin.rfind('/') + 1) + database;
  Psql(admin, "drop database if exists " + database);
  ASSERT_TRUE(Psql(admin, "create database " + database));
  struct Cleanup {
    std::string admin, database;
    ~Cleanup() {
      Psql(admin, "alter database " + database + " allow_connections true");
      Psql(admin, "drop database if exists " + database + " with (force)");
    }
  } cleanup{admin, database};

  Topic t = SetUpTopic(testing::TestKafkaBootstrap());
  Publish(t, SourcePath("tests/data/article/events.jsonl"));
  NotifyListener manager;
  const int metrics_port = 22000 + getpid() % 1000;
  DaemonProcess daemon({"run", "-c", t.config_file, "--batch-size", "100", "--metrics-port",
                        std::to_string(metrics_port)},
                       url);
  daemon.SetEnv("NOTIFY_SOCKET", manager.path());
  daemon.Start();
  ASSERT_TRUE(WaitUntil([&] { return Processed(t.schema, url) >= kArticleEvents; }, kPatience))
      << daemon.Log();
  // Events counted on /metrics: applied, stale and dead letters.
  auto counted = [&] {
    const std::string text = testing::HttpGet(metrics_port, "/metrics");
    uint64_t sum = 0;
    for (const char* series : {"denormd_events_applied_total ", "denormd_events_stale_total ",
                               "denormd_dead_letters_total "}) {
      const size_t at = text.find(std::string("\n") + series);
      if (at == std::string::npos) return uint64_t{0};
      sum += std::strtoull(text.c_str() + at + 1 + std::strlen(series), nullptr, 10);
    }
    return sum;
  };
  ASSERT_TRUE(WaitUntil([&] { return counted() == kArticleEvents; }, kPatience)) << daemon.Log();

  // A field added to the posts' recent comments, applied while it runs.
  std::string text = testing::ReadFile(t.config_file);
  const std::string select = "        limit: 3\n        select: [id, author, comment]\n";
  ASSERT_NE(std::string::npos, text.find(select));
  text.replace(text.find(select), select.size(),
               "        limit: 3\n        select: [id, author, comment, createdAt]\n");
  const std::string next = testing::WriteTempFile("next.yaml", text);
  testing::CommandResult apply = testing::RunDenormdWith({{"DENORMD_POSTGRES", url}}, {"apply", "-c", next});
  ASSERT_EQ(0, apply.code) << apply.out << apply.err;

  // The next batch is fenced; the model cannot be read until connections
  // are allowed again.
  ASSERT_TRUE(Psql(admin, "alter database " + database + " allow_connections false"));
  Publish(t, SourcePath("tests/data/article/events-random.jsonl"));
  ASSERT_TRUE(WaitUntil(
      [&] {
        if (!daemon.Running()) return true;  // gave up: the next assertion says so
        const std::string log = daemon.Log();
        const size_t fenced = log.find("event=config_epoch_changed");
        return fenced != std::string::npos &&
               log.find("event=store_unavailable", fenced) != std::string::npos &&
               log.find("reading=\"the store's projections\"", fenced) != std::string::npos;
      },
      kPatience))
      << daemon.Log();
  ASSERT_TRUE(Await(manager, daemon, [](const std::string& m) {
    return Has(m, "STATUS=waiting for PostgreSQL to read the store's projections: attempt ");
  })) << daemon.Log();
  EXPECT_TRUE(daemon.Running()) << daemon.Log();
  // Between the two pipelines the port still answers: the store is away.
  const std::string health = testing::HttpGet(metrics_port, "/healthz");
  EXPECT_NE(std::string::npos, health.find(" 503 ")) << health;
  EXPECT_NE(std::string::npos, health.find("store unavailable")) << health;

  ASSERT_TRUE(Psql(admin, "alter database " + database + " allow_connections true"));
  ASSERT_TRUE(WaitUntil([&] { return Processed(t.schema, url) >= kArticleEvents + kRandomEvents; },
                        kPatience))
      << daemon.Log();
  EXPECT_TRUE(Has(daemon.Log(), "event=config_loaded_from_store")) << daemon.Log();
  // Counted once each, across the restart (the fenced batch committed nothing).
  EXPECT_TRUE(WaitUntil([&] { return counted() == kArticleEvents + kRandomEvents; }, 10))
      << counted() << "\n" << daemon.Log();
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  // Every document is the new model's.
  testing::CommandResult verify = testing::RunDenormdWith({{"DENORMD_POSTGRES", url}}, {"verify", "-c", next});
  EXPECT_EQ(0, verify.code) << verify.out << verify.err;
  EXPECT_TRUE(Has(verify.out, "all documents match")) << verify.out << verify.err;
}

// The batch_committed lines (-v) after the first line containing `after`:
// the largest events= among them, and how many there are.
std::pair<uint64_t, int> BatchesAfter(const std::string& log, const std::string& after) {
  size_t at = log.find(after);
  if (at == std::string::npos) return {0, 0};
  std::pair<uint64_t, int> out{0, 0};
  const std::string key = "event=batch_committed events=";
  while ((at = log.find(key, at)) != std::string::npos) {
    at += key.size();
    out.first = std::max<uint64_t>(out.first, std::strtoull(log.c_str() + at, nullptr, 10));
    out.second++;
  }
  return out;
}

// Sends SIGHUP; waits for RELOADING=1 (with MONOTONIC_USEC) and READY=1.
void Reload(DaemonProcess& daemon, NotifyListener& manager) {
  ASSERT_EQ(0, kill(daemon.pid(), SIGHUP));
  ASSERT_TRUE(Await(manager, daemon, [](const std::string& m) {
    return Says(m, "RELOADING=1") && Has(m, "MONOTONIC_USEC=");
  })) << daemon.Log();
  ASSERT_TRUE(AwaitLine(manager, daemon, "READY=1"))
      << daemon.Log();
}

TEST(ServiceDaemon, SighupAppliesBatchSettingsAndRefusesAChangedProjection) {
  Topic t = SetUpTopic(testing::TestKafkaBootstrap());
  const std::string original = testing::ReadFile(t.config_file);
  Topic publisher = t;  // publishes with a config of its own: the daemon's changes
  publisher.config_file = testing::WriteTempFile("publisher.yaml", original);
  NotifyListener manager;
  DaemonProcess daemon({"run", "-c", t.config_file, "-v"}, testing::TestPostgresUrl());
  daemon.SetEnv("NOTIFY_SOCKET", manager.path());
  daemon.Start();
  ASSERT_TRUE(AwaitLine(manager, daemon, "READY=1"))
      << daemon.Log();

  // batch.max_events: applied live.
  WriteFile(t.config_file, original + "batch:\n  max_events: 7\n");
  Reload(daemon, manager);
  ASSERT_TRUE(WaitUntil([&] { return Has(daemon.Log(), "event=config_reloaded"); }, kPatience));
  const std::string reloaded = daemon.Log();
  EXPECT_TRUE(Has(reloaded, "changed=batch.max_events batch_max_events=7")) << reloaded;
  Publish(publisher, SourcePath("tests/data/article/events.jsonl"));
  ASSERT_TRUE(WaitUntil([&] { return Processed(t.schema) >= kArticleEvents; }, kPatience))
      << daemon.Log();
  std::pair<uint64_t, int> batches = BatchesAfter(daemon.Log(), "event=config_reloaded");
  EXPECT_EQ(7u, batches.first) << daemon.Log();
  EXPECT_GE(batches.second, static_cast<int>(kArticleEvents / 7)) << daemon.Log();

  // A projection changed (and max_events again): refused as a whole, one line.
  std::string changed = original + "batch:\n  max_events: 50\n";
  const std::string include = "include: [firstName, lastName, holdings]";
  changed.replace(changed.find(include), include.size(), "include: [firstName, lastName]");
  WriteFile(t.config_file, changed);
  Reload(daemon, manager);
  ASSERT_TRUE(WaitUntil([&] { return Has(daemon.Log(), "event=config_reload_refused"); }, kPatience));
  const std::string refused = daemon.Log();
  EXPECT_TRUE(Has(refused, "level=error event=config_reload_refused file=" + t.config_file +
                               " changed=projections.portfolios needs=\"`denormd apply`\""))
      << refused;
  EXPECT_TRUE(Has(manager.received().back(), "reload refused: projections.portfolios"))
      << manager.received().back();

  // An invalid file: refused too, every error logged.
  WriteFile(t.config_file, original + "batch:\n  max_events: zero\n");
  Reload(daemon, manager);
  ASSERT_TRUE(WaitUntil([&] { return Has(daemon.Log(), "does not validate"); }, kPatience));
  EXPECT_TRUE(Has(daemon.Log(), "event=config_error error=\"" + t.config_file)) << daemon.Log();

  // Still consuming, with the configuration it had: batches of at most 7.
  Publish(publisher, SourcePath("tests/data/article/events-random.jsonl"));
  ASSERT_TRUE(WaitUntil([&] { return Processed(t.schema) >= kArticleEvents + kRandomEvents; },
                        kPatience))
      << daemon.Log();
  batches = BatchesAfter(daemon.Log(), "does not validate");
  EXPECT_EQ(7u, batches.first) << daemon.Log();
  EXPECT_TRUE(daemon.Running());
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  WriteFile(t.config_file, original);
  std::string output;
  EXPECT_EQ(0, RunDenormd({"verify", "-c", t.config_file}, &output)) << output;
}

}  // namespace
}  // namespace denormd
