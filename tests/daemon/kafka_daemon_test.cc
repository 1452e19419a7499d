// `denormd run` against a real Apache Kafka broker and the real PostgreSQL:
// exactly-once effects through kill -9, a second instance, a broker restart,
// a PostgreSQL outage; bad messages; SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <random>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::DaemonProcess;
using testing::EventsProcessed;
using testing::RunDenormd;
using testing::SourcePath;
using testing::Sql;
using testing::WaitUntil;

constexpr uint64_t kRandomEvents = 3343;  // lines of events-random.jsonl
constexpr int kPatience = 180;            // seconds before a wait counts as hung

// What the database is doing, for the message of a wait that timed out.
std::string Activity() {
  std::string out = "\npg_stat_activity:\n";
  for (const std::string& row :
       Sql("select pid, state, wait_event_type, wait_event, left(query, 120) from "
           "pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()")) {
    out += "  " + row + "\n";
  }
  return out;
}

std::string KafkaPort(const std::string& bootstrap) {
  return bootstrap.substr(bootstrap.rfind(':') + 1);
}

int CreateTopic(const std::string& bootstrap, const std::string& topic, int partitions) {
  std::string output;
  return testing::RunScript("kafka.sh", {"topic-create", topic, std::to_string(partitions)},
                            {{"DENORMD_KAFKA_PORT", KafkaPort(bootstrap)}}, &output);
}

struct KafkaTestSetup {
  std::string schema;
  std::string topic;
  std::string config_file;
  Config config;
};

KafkaTestSetup SetUpTopic(int partitions, const std::string& brokers, const std::string& extra = "") {
  KafkaTestSetup s;
  s.schema = testing::TestSchemaName();
  s.topic = s.schema + "_" + std::to_string(getpid());
  s.config = testing::LoadTestConfig("tests/data/article/config.yaml", s.schema);
  s.config_file = testing::WriteKafkaArticleConfig(s.schema, brokers, s.topic, extra);
  EXPECT_EQ(0, CreateTopic(brokers, s.topic, partitions));
  return s;
}

void Publish(const KafkaTestSetup& s, const std::string& log) {
  std::string output;
  ASSERT_EQ(0, RunDenormd({"publish", "-c", s.config_file, log}, &output)) << output;
}

void ExpectExactRandomResult(const KafkaTestSetup& s) {
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(s.config),
                                         SourcePath("tests/data/article/expected-random.json")));
  EXPECT_EQ(std::vector<std::string>({"3277\t59\t7"}),
            Sql("select sum(applied), sum(stale), sum(dead) from " + s.schema + ".positions"));
  EXPECT_EQ(std::vector<std::string>({"7"}),
            Sql("select count(*) from " + s.schema + ".dead_letters"));
}

std::vector<std::string> RunArgs(const KafkaTestSetup& s, const std::string& batch) {
  return {"run", "-c", s.config_file, "--batch-size", batch};
}

TEST(KafkaDaemon, KillNineAtRandomPointsThenRestartEndsExact) {
  KafkaTestSetup s = SetUpTopic(2, testing::TestKafkaBootstrap());
  Publish(s, SourcePath("tests/data/article/events-random.jsonl"));
  std::mt19937 random(4242);
  int kills = 0;
  for (int round = 0; round < 4; ++round) {
    DaemonProcess daemon(RunArgs(s, "40"), s.config.store.postgres);
    uint64_t before = EventsProcessed(s.schema);
    // A target past the stream's end would never be reached: the lanes may
    // commit hundreds of events between two looks at the count (one look
    // saw 747 past its target), so four rounds can get near the end.
    uint64_t target = std::min<uint64_t>(before + 100 + random() % 600, kRandomEvents);
    daemon.Start();
    ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= target || !daemon.Running(); },
                          kPatience))
        << "round " << round << ": from " << before << " to " << target << " of "
        << kRandomEvents << " events\n"
        << daemon.Log();
    if (daemon.Running()) {
      daemon.Kill();
      kills++;
    }
  }
  EXPECT_GE(kills, 3);
  DaemonProcess daemon(RunArgs(s, "40"), s.config.store.postgres);
  daemon.Start();
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= kRandomEvents; }, kPatience))
      << daemon.Log() << Activity();
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  ExpectExactRandomResult(s);
}

TEST(KafkaDaemon, TwoInstancesOneKilledAndRestartedEndsExact) {
  KafkaTestSetup s = SetUpTopic(4, testing::TestKafkaBootstrap());
  Publish(s, SourcePath("tests/data/article/events-random.jsonl"));
  DaemonProcess a(RunArgs(s, "20"), s.config.store.postgres);
  DaemonProcess b(RunArgs(s, "20"), s.config.store.postgres);
  a.Start();
  b.Start();
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= kRandomEvents / 4; }, kPatience))
      << a.Log() << b.Log();
  a.Kill();
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= kRandomEvents / 2; }, kPatience))
      << b.Log();
  a.Start();
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= kRandomEvents; }, kPatience))
      << a.Log() << b.Log() << Activity();
  EXPECT_EQ(0, a.Terminate(30)) << a.Log();
  EXPECT_EQ(0, b.Terminate(30)) << b.Log();
  ExpectExactRandomResult(s);
}

TEST(KafkaDaemon, SigtermFinishesTheBatchCommitsAndExitsZero) {
  KafkaTestSetup s = SetUpTopic(1, testing::TestKafkaBootstrap());
  Publish(s, SourcePath("tests/data/article/events-random.jsonl"));
  DaemonProcess daemon(RunArgs(s, "10"), s.config.store.postgres);
  daemon.Start();
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= 200; }, kPatience)) << daemon.Log();
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  std::string log = daemon.Log();
  EXPECT_NE(std::string::npos, log.find("event=partitions_revoked")) << log;  // left the group
  EXPECT_NE(std::string::npos, log.find("event=daemon_stopped exit_code=0 signal=15")) << log;
  // What was committed is consistent: a restart finishes exactly.
  uint64_t committed = EventsProcessed(s.schema);
  EXPECT_GE(committed, 200u);
  DaemonProcess again(RunArgs(s, "5000"), s.config.store.postgres);
  again.Start();
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= kRandomEvents; }, kPatience))
      << again.Log();
  EXPECT_EQ(0, again.Terminate(30));
  ExpectExactRandomResult(s);
}

TEST(KafkaDaemon, BadMessagesGoToTheTableAndTheDeadLetterTopic) {
  std::string dlq = testing::TestSchemaName() + "_dlq";
  KafkaTestSetup s =
      SetUpTopic(1, testing::TestKafkaBootstrap(), "    dead_letter_topic: " + dlq + "\n");
  ASSERT_EQ(0, CreateTopic(testing::TestKafkaBootstrap(), dlq, 1));
  std::string output;
  Publish(s, SourcePath("tests/data/article/events.jsonl"));
  DaemonProcess daemon(RunArgs(s, "5000"), s.config.store.postgres);
  daemon.Start();
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= 286; }, kPatience)) << daemon.Log();
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(s.config),
                                         SourcePath("tests/data/article/expected.json")));
  // topic, partition, offset, raw bytes and reason of each bad message.
  std::vector<std::string> letters =
      Sql("select source, partition, position, convert_from(raw, 'UTF8'), reason from " +
          s.schema + ".dead_letters order by position");
  ASSERT_EQ(7u, letters.size());
  EXPECT_EQ(0u, letters[0].find("kafka:" + s.schema + ":" + s.topic + "\t0\t")) << letters[0];
  EXPECT_NE(std::string::npos, letters[1].find("dragon")) << letters[1];
  EXPECT_NE(std::string::npos, letters[1].find("unknown entity type")) << letters[1];
  // The dead-letter topic got the same seven messages.
  ASSERT_EQ(0, testing::RunScript("kafka.sh", {"consume", dlq, "7"},
                                  {{"DENORMD_KAFKA_PORT", KafkaPort(testing::TestKafkaBootstrap())}},
                                  &output));
  EXPECT_NE(std::string::npos, output.find("\"dragon\"")) << output;
  EXPECT_NE(std::string::npos, output.find("[1, 2, 3]")) << output;
}

// `run` prunes every retention.interval_s between batches: with a cap of two
// dead letters, the seven bad lines of the example leave the two newest.
TEST(KafkaDaemon, RunPrunesDeadLettersPastTheCapEveryInterval) {
  KafkaTestSetup s = SetUpTopic(1, testing::TestKafkaBootstrap(),
                                "retention: {interval_s: 1, max_dead_letters: 2}\n");
  Publish(s, SourcePath("tests/data/article/events.jsonl"));
  DaemonProcess daemon(RunArgs(s, "5000"), s.config.store.postgres);
  daemon.Start();
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= 286; }, kPatience)) << daemon.Log();
  const std::string count = "select count(*) from " + s.schema + ".dead_letters";
  ASSERT_TRUE(WaitUntil([&] { return Sql(count) == std::vector<std::string>{"2"}; }, kPatience))
      << daemon.Log();
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  EXPECT_NE(std::string::npos, daemon.Log().find("pruned")) << daemon.Log();
  // Seven were dead-lettered; the documents are untouched.
  EXPECT_EQ(std::vector<std::string>({"7"}),
            Sql("select sum(dead) from " + s.schema + ".positions"));
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(s.config),
                                         SourcePath("tests/data/article/expected.json")));
}

// The prune runs on a thread and a connection of its own: batches go on while
// it runs. Here the prune is held up by a lock on the dead-letter table (which
// valid events never touch) while events arrive; when it ran between two
// batches, as it once did, no batch committed until it ended (on the
// benchmark's soak store each prune stopped the batches for 3.6 to 8.5 s).
TEST(KafkaDaemon, BatchesGoOnWhileAPruneRuns) {
  KafkaTestSetup s = SetUpTopic(1, testing::TestKafkaBootstrap(), "retention: {interval_s: 1}\n");
  DaemonProcess daemon(RunArgs(s, "50"), s.config.store.postgres);
  daemon.Start();
  ASSERT_TRUE(WaitUntil(
      [&] {
        return Sql("select to_regclass('" + s.schema + ".dead_letters') is not null") ==
               std::vector<std::string>{"t"};
      },
      kPatience))
      << daemon.Log();
  pqxx::connection holder(testing::TestPostgresUrl());
  pqxx::work lock(holder);
  lock.exec("lock table " + s.schema + ".dead_letters in access exclusive mode");
  // The next prune (within a second) waits for the lock.
  const std::string waiting =
      "select count(*) from pg_stat_activity where wait_event_type = 'Lock' and query like "
      "'%" + s.schema + "%.dead_letters%'";
  ASSERT_TRUE(WaitUntil([&] { return Sql(waiting) == std::vector<std::string>{"1"}; }, kPatience))
      << daemon.Log();
  std::string events;
  for (int i = 1; i <= 200; ++i) {
    events += R"({"type":"author","id":"p)" + std::to_string(i) +
              R"(","op":"upsert","version":1,"data":{"firstName":"F","lastName":"L"}})" "\n";
  }
  Publish(s, testing::WriteTempFile("valid.jsonl", events));
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= 200; }, kPatience))
      << "no batch committed while the prune waited:\n" << daemon.Log();
  EXPECT_EQ(std::vector<std::string>{"1"}, Sql(waiting));  // still waiting meanwhile
  lock.abort();
  // Released, it ends and says what it removed (the authors' lock rows).
  ASSERT_TRUE(WaitUntil([&] { return daemon.Log().find("event=pruned") != std::string::npos; },
                        kPatience))
      << daemon.Log();
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  EXPECT_EQ(std::vector<std::string>{"200"},
            Sql("select count(*) from " + s.schema + ".authors where id like 'p%'"));
}

// A dead letter larger than the producer may send is sent truncated, with a
// header giving its size, instead of being retried for ever (which stalled
// the consumer); the dead-letter producer gets source.kafka.properties (here
// its message.max.bytes), and the table keeps the letter whole.
TEST(KafkaDaemon, AnOversizedDeadLetterIsTruncatedNotRetriedForEver) {
  std::string dlq = testing::TestSchemaName() + "_dlq";
  KafkaTestSetup s =
      SetUpTopic(1, testing::TestKafkaBootstrap(), "    dead_letter_topic: " + dlq + "\n");
  ASSERT_EQ(0, CreateTopic(testing::TestKafkaBootstrap(), dlq, 1));
  std::string big = R"({"type":"dragon","id":"x","op":"upsert","data":{"hoard":")" +
                    std::string(300000, 'g') + "\"}}\n";
  Publish(s, testing::WriteTempFile("big.jsonl", big));
  Publish(s, SourcePath("tests/data/article/events.jsonl"));
  std::string limited = testing::ReadFile(s.config_file);
  const std::string properties = "heartbeat.interval.ms: 500}";
  limited.replace(limited.find(properties), properties.size(),
                  "heartbeat.interval.ms: 500, message.max.bytes: 100000}");
  KafkaTestSetup run = s;
  run.config_file = testing::WriteTempFile("limited.yaml", limited);
  DaemonProcess daemon(RunArgs(run, "5000"), s.config.store.postgres);
  daemon.Start();
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= 287; }, kPatience)) << daemon.Log();
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(s.config),
                                         SourcePath("tests/data/article/expected.json")));
  EXPECT_EQ(std::vector<std::string>({"300060"}),
            Sql("select length(raw) from " + s.schema + ".dead_letters where position = 0"));
  EXPECT_NE(std::string::npos, daemon.Log().find("event=dead_letter_truncated")) << daemon.Log();
  std::string output;
  ASSERT_EQ(0, testing::RunScript("kafka.sh",
                                  {"consume", dlq, "8", "--property", "print.headers=true"},
                                  {{"DENORMD_KAFKA_PORT", KafkaPort(testing::TestKafkaBootstrap())}},
                                  &output));
  EXPECT_NE(std::string::npos, output.find("denormd-truncated:300060")) << output.substr(0, 4000);
}

using testing::PrivateKafka;

TEST(KafkaDaemon, BrokerRestartWhileRunningLosesNothing) {
  PrivateKafka kafka;
  ASSERT_EQ(0, kafka.Run({"start"}));
  std::string schema = testing::TestSchemaName();
  KafkaTestSetup s;
  s.schema = schema;
  s.topic = schema;
  s.config = testing::LoadTestConfig("tests/data/article/config.yaml", schema);
  s.config_file = testing::WriteKafkaArticleConfig(schema, kafka.bootstrap(), s.topic);
  ASSERT_EQ(0, kafka.Run({"topic-create", s.topic, "2"}));
  // The random log in two halves: one before the outage, one after.
  std::string all = testing::ReadFile(SourcePath("tests/data/article/events-random.jsonl"));
  size_t middle = all.find('\n', all.size() / 2) + 1;
  std::string first = testing::WriteTempFile("first.jsonl", all.substr(0, middle));
  std::string second = testing::WriteTempFile("second.jsonl", all.substr(middle));
  uint64_t first_count = std::count(all.begin(), all.begin() + middle, '\n');
  Publish(s, first);
  DaemonProcess daemon(RunArgs(s, "100"), s.config.store.postgres);
  daemon.Start();
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(schema) >= first_count; }, kPatience))
      << daemon.Log();
  ASSERT_EQ(0, kafka.Run({"stop"}));
  // The daemon neither exits on the outage...
  ASSERT_TRUE(WaitUntil([&] { return daemon.Log().find("event=kafka_error") != std::string::npos; },
                        kPatience))
      << daemon.Log();
  EXPECT_TRUE(daemon.Running()) << daemon.Log();
  ASSERT_EQ(0, kafka.Run({"start"}));
  Publish(s, second);
  // ...nor after it, and it reads on from where it was.
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(schema) >= kRandomEvents; }, kPatience))
      << daemon.Log();
  EXPECT_TRUE(daemon.Running()) << daemon.Log();
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  ExpectExactRandomResult(s);
}

// A batch blocked behind a lock another session holds: /healthz says the
// batch is stuck (503, no database detail), and SIGTERM ends the run within a
// bounded time by cancelling the statement (exit 0, nothing half-applied);
// the next run applies everything.
TEST(KafkaDaemon, SigtermEndsABatchStuckBehindALock) {
  KafkaTestSetup s =
      SetUpTopic(1, testing::TestKafkaBootstrap(), "batch: {stuck_after_s: 1}\n");
  const int metrics_port = 24000 + getpid() % 1000;
  std::vector<std::string> args = RunArgs(s, "5000");
  args.insert(args.end(), {"--metrics-port", std::to_string(metrics_port)});
  {
    DaemonProcess daemon(args, s.config.store.postgres);
    daemon.Start();
    // Started: the store's tables exist and /healthz answers ok.
    ASSERT_TRUE(WaitUntil(
        [&] { return testing::HttpGet(metrics_port, "/healthz").find(" 200 ") != std::string::npos; },
        kPatience))
        << daemon.Log();
    pqxx::connection holder(testing::TestPostgresUrl());
    pqxx::work lock(holder);
    lock.exec("lock table " + s.schema + ".entities in access exclusive mode");
    Publish(s, SourcePath("tests/data/article/events.jsonl"));
    std::string health;
    ASSERT_TRUE(WaitUntil(
        [&] {
          health = testing::HttpGet(metrics_port, "/healthz");
          return health.find("batch stuck") != std::string::npos;
        },
        kPatience))
        << health << daemon.Log();
    EXPECT_EQ(0u, health.find("HTTP/1.1 503")) << health;
    EXPECT_EQ(std::string::npos, health.find("127.0.0.1")) << health;
    // The default lock_timeout is 60 s: ending within 30 s needs the cancel.
    EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
    EXPECT_NE(std::string::npos, daemon.Log().find("stop_cancelled_statement")) << daemon.Log();
    EXPECT_NE(std::string::npos, daemon.Log().find("batch_abandoned_for_stop")) << daemon.Log();
    lock.abort();
  }
  EXPECT_EQ(0u, EventsProcessed(s.schema));  // nothing of the stuck batch committed
  DaemonProcess again(RunArgs(s, "5000"), s.config.store.postgres);
  again.Start();
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= 286; }, kPatience)) << again.Log();
  EXPECT_EQ(0, again.Terminate(30)) << again.Log();
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(s.config),
                                         SourcePath("tests/data/article/expected.json")));
}

TEST(KafkaDaemon, PostgresOutagePausesWithRetriesThenResumes) {
  // A PostgreSQL of the test's own, so that stopping it disturbs no other test.
  int port = 23000 + getpid() % 1000;
  std::string state = std::string(::testing::TempDir()) + "/denormd-pg-" + std::to_string(getpid());
  std::vector<std::pair<std::string, std::string>> env = {
      {"DENORMD_STATE_DIR", state}, {"DENORMD_PG_PORT", std::to_string(port)}};
  std::string url;
  ASSERT_EQ(0, testing::RunScript("postgres.sh", {"start"}, env, &url));
  struct Cleanup {
    std::vector<std::pair<std::string, std::string>> env;
    std::string state;
    ~Cleanup() {
      std::string ignored;
      testing::RunScript("postgres.sh", {"stop"}, env, &ignored);
      std::system(("rm -rf '" + state + "'").c_str());
    }
  } cleanup{env, state};

  std::string schema = testing::TestSchemaName();
  KafkaTestSetup s;
  s.schema = schema;
  s.topic = schema + "_" + std::to_string(getpid());
  s.config_file = testing::WriteKafkaArticleConfig(schema, testing::TestKafkaBootstrap(), s.topic);
  std::string output;
  ASSERT_EQ(0, CreateTopic(testing::TestKafkaBootstrap(), s.topic, 1));
  std::string all = testing::ReadFile(SourcePath("tests/data/article/events-random.jsonl"));
  size_t middle = all.find('\n', all.size() / 2) + 1;
  uint64_t first_count = std::count(all.begin(), all.begin() + middle, '\n');
  Publish(s, testing::WriteTempFile("first.jsonl", all.substr(0, middle)));

  auto processed = [&]() -> uint64_t {
    std::string rows;
    std::string command = "psql -X -q -t -A '" + url + "' -c \"select coalesce(sum(applied + "
                          "stale + dead), 0) from " + schema + ".positions\" 2>/dev/null";
    FILE* pipe = popen(command.c_str(), "r");
    char buffer[128] = {0};
    size_t n = fread(buffer, 1, sizeof(buffer) - 1, pipe);
    pclose(pipe);
    buffer[n] = 0;
    return std::strtoull(buffer, nullptr, 10);
  };
  DaemonProcess daemon({"run", "-c", s.config_file, "--batch-size", "100", "--metrics-port",
                        std::to_string(port + 1000)},
                       url);
  daemon.Start();
  ASSERT_TRUE(WaitUntil([&] { return processed() >= first_count; }, kPatience)) << daemon.Log();

  ASSERT_EQ(0, testing::RunScript("postgres.sh", {"stop"}, env, &output));
  Publish(s, testing::WriteTempFile("second.jsonl", all.substr(middle)));
  ASSERT_TRUE(WaitUntil([&] { return daemon.Log().find("event=batch_retry") != std::string::npos; },
                        kPatience))
      << daemon.Log();
  // Health says why while the store is away.
  std::string health = testing::HttpGet(port + 1000, "/healthz");
  EXPECT_EQ(0u, health.find("HTTP/1.1 503")) << health;
  EXPECT_NE(std::string::npos, health.find("store unavailable")) << health;
  // ...but not the server's error text: no host, port or user to anyone.
  EXPECT_EQ(std::string::npos, health.find("127.0.0.1")) << health;
  EXPECT_EQ(std::string::npos, health.find(std::to_string(port))) << health;
  EXPECT_TRUE(daemon.Running()) << daemon.Log();

  ASSERT_EQ(0, testing::RunScript("postgres.sh", {"start"}, env, &output));
  ASSERT_TRUE(WaitUntil([&] { return processed() >= kRandomEvents; }, kPatience)) << daemon.Log();
  EXPECT_NE(std::string::npos, daemon.Log().find("event=batch_recovered")) << daemon.Log();
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  ASSERT_EQ(0, RunDenormd({"verify", "-c", s.config_file, "--postgres", url}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("all documents match")) << output;
}

}  // namespace
}  // namespace denormd
