// The change feed on a real Apache Kafka broker and the real PostgreSQL:
// `denormd run` (and `denormd relay`) publish every committed document change;
// a consumer reading the feed topic with isolation.level=read_committed into
// a map per collection must end with exactly the tables, having never seen a
// sequence number twice nor a key go back to an older document — after the
// article and the random scenarios, through kill -9 at random points and at
// each named crash point, a broker restart, two instances sharing the group,
// and a broker that refuses large messages.
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "common/text.h"
#include "connectors/kafka_feed_sink.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::DaemonProcess;
using testing::EventsProcessed;
using testing::FeedReplica;
using testing::RunDenormd;
using testing::SourcePath;
using testing::Sql;
using testing::SqlCount;
using testing::WaitUntil;

constexpr uint64_t kOrderedEvents = 286;  // lines of events.jsonl
constexpr uint64_t kRandomEvents = 3343;  // lines of events-random.jsonl
constexpr int kPatience = 180;            // seconds before a wait counts as hung

// Changes waiting in the outbox (-1 before it exists).
int64_t Waiting(const std::string& schema) {
  if (Sql("select to_regclass('" + schema + ".outbox') is null")[0] == "t") return -1;
  return static_cast<int64_t>(SqlCount("select count(*) from " + schema + ".outbox"));
}

std::string KafkaPort(const std::string& bootstrap) {
  return bootstrap.substr(bootstrap.rfind(':') + 1);
}

int CreateTopic(const std::string& bootstrap, const std::vector<std::string>& args) {
  std::vector<std::string> command = {"topic-create"};
  command.insert(command.end(), args.begin(), args.end());
  std::string output;
  return testing::RunScript("kafka.sh", command, {{"DENORMD_KAFKA_PORT", KafkaPort(bootstrap)}},
                            &output);
}

struct FeedSetup {
  std::string schema;
  std::string brokers;
  std::string topic;       // the input
  std::string feed_topic;  // the change feed
  std::string config_file;
  Config config;           // as the daemon reads it (with the feed)
};

// The article config on a fresh schema with its own input topic and a feed
// of every collection to a topic of 3 partitions (created here, with
// `feed_topic_configs`), `feed_extra` added to the feed section.
FeedSetup SetUpFeed(const std::string& brokers, int partitions, const std::string& feed_extra = "",
                    const std::vector<std::string>& feed_topic_configs = {}) {
  FeedSetup s;
  s.schema = testing::TestSchemaName();
  s.brokers = brokers;
  s.topic = s.schema + "_" + std::to_string(getpid());
  s.feed_topic = s.topic + "_docs";
  testing::LoadTestConfig("tests/data/article/config.yaml", s.schema);  // drops the schema
  s.config_file = testing::WriteKafkaArticleConfig(s.schema, brokers, s.topic);
  {
    std::ofstream out(s.config_file, std::ios::app);
    out << "feed:\n  topic: " << s.feed_topic << "\n  transactional_id: " << s.topic
        << "-feed\n" << feed_extra;
  }
  std::vector<ConfigError> errors;
  std::optional<Config> config = LoadConfig(s.config_file, &errors);
  for (const ConfigError& e : errors) ADD_FAILURE() << e.ToString(s.config_file);
  if (config) s.config = *config;
  s.config.store.postgres = testing::TestPostgresUrl();
  EXPECT_EQ(0, CreateTopic(brokers, {s.topic, std::to_string(partitions)}));
  std::vector<std::string> feed_args = {s.feed_topic, "3"};
  feed_args.insert(feed_args.end(), feed_topic_configs.begin(), feed_topic_configs.end());
  EXPECT_EQ(0, CreateTopic(brokers, feed_args));
  return s;
}

void Publish(const FeedSetup& s, const std::string& log) {
  std::string output;
  ASSERT_EQ(0, RunDenormd({"publish", "-c", s.config_file, log}, &output)) << output;
}

std::vector<std::string> RunArgs(const FeedSetup& s, const std::string& batch) {
  return {"run", "-c", s.config_file, "--batch-size", batch};
}

// Everything applied and everything published (the outbox empty).
bool Done(const FeedSetup& s, uint64_t events) {
  return EventsProcessed(s.schema) >= events && Waiting(s.schema) == 0;
}

// The feed topic read to its end; its checks, and the replica against the
// tables. Returns the replica for more checks.
FeedReplica ExpectTheFeedEqualsTheTables(const FeedSetup& s) {
  return testing::ExpectFeedEqualsTables(s.brokers, s.feed_topic, s.config);
}

void ExpectExactRandomTables(const FeedSetup& s) {
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(s.config),
                                         SourcePath("tests/data/article/expected-random.json")));
  EXPECT_EQ(std::vector<std::string>({"3277\t59\t7"}),
            Sql("select sum(applied), sum(stale), sum(dead) from " + s.schema + ".positions"));
}

// The value of an unlabelled sample in a /metrics text.
std::string Sample(const std::string& text, const std::string& name) {
  size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return "";
  at += name.size() + 2;
  return text.substr(at, text.find('\n', at) - at);
}

TEST(FeedKafka, TheArticleScenarioOnTheTopicEqualsTheTables) {
  FeedSetup s = SetUpFeed(testing::TestKafkaBootstrap(), 1);
  Publish(s, SourcePath("tests/data/article/events.jsonl"));
  DaemonProcess daemon(RunArgs(s, "7"), s.config.store.postgres);
  daemon.Start();
  ASSERT_TRUE(WaitUntil([&] { return Done(s, kOrderedEvents); }, kPatience)) << daemon.Log();
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(s.config),
                                         SourcePath("tests/data/article/expected.json")));
  FeedReplica replica = ExpectTheFeedEqualsTheTables(s);
  EXPECT_EQ(9u, replica.documents().size());  // every collection
  // The mixed collection is keyed [pk, id].
  EXPECT_TRUE(replica.documents().at("catalog").count(R"(["b1","b1"])"));
  EXPECT_TRUE(replica.documents().at("authors").count("a1"));
}

// The appliers do not need the relay: `run --no-relay` commits everything
// while the outbox grows (status and /metrics show it); `denormd relay`
// alone then publishes it.
TEST(FeedKafka, TheRandomScenarioPublishedByARelayOfItsOwn) {
  FeedSetup s = SetUpFeed(testing::TestKafkaBootstrap(), 2, "  max_messages: 100\n");
  Publish(s, SourcePath("tests/data/article/events-random.jsonl"));
  DaemonProcess daemon({"run", "-c", s.config_file, "--batch-size", "50", "--no-relay"},
                       s.config.store.postgres);
  daemon.Start();
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= kRandomEvents; }, kPatience))
      << daemon.Log();
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  ExpectExactRandomTables(s);
  const int64_t waiting = Waiting(s.schema);
  EXPECT_GT(waiting, 1000);
  std::string output;
  ASSERT_EQ(0, RunDenormd({"status", "-c", s.config_file}, &output)) << output;
  EXPECT_NE(std::string::npos,
            output.find("outbox: " + FormatCount(static_cast<uint64_t>(waiting)) + " changes waiting"))
      << output;
  EXPECT_NE(std::string::npos, output.find("published: nothing yet")) << output;

  const int port = 24000 + getpid() % 1000;
  DaemonProcess relay({"relay", "-c", s.config_file, "--metrics-port", std::to_string(port)},
                      s.config.store.postgres);
  relay.Start();
  ASSERT_TRUE(WaitUntil([&] { return Waiting(s.schema) == 0; }, kPatience)) << relay.Log();
  std::string metrics;
  ASSERT_TRUE(WaitUntil([&] {
    metrics = testing::HttpGet(port, "/metrics");
    return Sample(metrics, "denormd_feed_outbox_rows") == "0";
  }, 30)) << metrics;
  EXPECT_EQ("1", Sample(metrics, "denormd_feed_relay_active"));
  EXPECT_EQ(std::to_string(waiting), Sample(metrics, "denormd_feed_published_total"));
  EXPECT_EQ(std::to_string(waiting), Sample(metrics, "denormd_feed_delay_seconds_count"));
  EXPECT_EQ(0, relay.Terminate(30)) << relay.Log();
  FeedReplica replica = ExpectTheFeedEqualsTheTables(s);
  EXPECT_EQ(static_cast<uint64_t>(waiting), replica.records());
  ASSERT_EQ(0, RunDenormd({"status", "-c", s.config_file}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("outbox: 0 changes waiting")) << output;
}

// kill -9 of `denormd run` at random moments, and at each named crash point:
// after a batch's PostgreSQL commit, inside a Kafka transaction just before
// its commit, and after the Kafka commit before the outbox is pruned. The
// stream arrives in 16 pieces, one before each round, so that every kill
// falls while there is work (batches and pages in flight).
TEST(FeedKafka, KillNineAtRandomPointsNeitherLosesNorRepeatsAChange) {
  FeedSetup s = SetUpFeed(testing::TestKafkaBootstrap(), 2, "  max_messages: 25\n");
  std::vector<std::string> lines;
  {
    std::string all = testing::ReadFile(SourcePath("tests/data/article/events-random.jsonl"));
    for (size_t start = 0; start < all.size();) {
      size_t end = all.find('\n', start);
      lines.push_back(all.substr(start, end - start + 1));
      start = end + 1;
    }
  }
  ASSERT_EQ(kRandomEvents, lines.size());
  constexpr int kRounds = 16;
  std::mt19937 random(2026);
  const std::vector<std::string> points = {"batch_after_commit", "feed_before_kafka_commit",
                                           "feed_after_kafka_commit"};
  int kills = 0, crashes = 0;
  uint64_t published = 0;
  for (int round = 0; round < kRounds; ++round) {
    const size_t from = lines.size() * round / kRounds, to = lines.size() * (round + 1) / kRounds;
    std::string piece;
    for (size_t i = from; i < to; ++i) piece += lines[i];
    Publish(s, testing::WriteTempFile("piece" + std::to_string(round) + ".jsonl", piece));
    published += to - from;
    const bool crash_point = round % 4 == 3 && crashes < 3;  // rounds 3, 7, 11
    if (crash_point) {
      setenv("DENORMD_CRASH_AT", points[crashes].c_str(), 1);
      setenv("DENORMD_CRASH_AFTER", std::to_string(2 + random() % 3).c_str(), 1);
    }
    DaemonProcess daemon(RunArgs(s, "10"), s.config.store.postgres);
    daemon.Start();
    unsetenv("DENORMD_CRASH_AT");
    unsetenv("DENORMD_CRASH_AFTER");
    if (crash_point) {
      ASSERT_TRUE(WaitUntil([&] { return !daemon.Running(); }, kPatience)) << daemon.Log();
      EXPECT_NE(std::string::npos, daemon.Log().find("event=crash_point point=" + points[crashes]))
          << daemon.Log();
      crashes++;
      continue;
    }
    // Some of what is waiting applied, then a random moment.
    const uint64_t before = EventsProcessed(s.schema);
    const uint64_t target = before + random() % std::max<uint64_t>(1, published - before);
    ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= target || !daemon.Running(); },
                          kPatience))
        << daemon.Log();
    usleep(static_cast<useconds_t>(random() % 300) * 1000);
    ASSERT_TRUE(daemon.Running()) << daemon.Log();
    daemon.Kill();
    kills++;
  }
  EXPECT_GE(kills, 10);
  EXPECT_EQ(3, crashes);
  DaemonProcess daemon(RunArgs(s, "20"), s.config.store.postgres);
  daemon.Start();
  ASSERT_TRUE(WaitUntil([&] { return Done(s, kRandomEvents); }, kPatience)) << daemon.Log();
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  ExpectExactRandomTables(s);
  ExpectTheFeedEqualsTheTables(s);
}

TEST(FeedKafka, BrokerRestartWhileRunningLosesNothing) {
  testing::PrivateKafka kafka;
  ASSERT_EQ(0, kafka.Run({"start"}));
  FeedSetup s = SetUpFeed(kafka.bootstrap(), 2, "  max_messages: 40\n");
  Publish(s, SourcePath("tests/data/article/events-random.jsonl"));
  DaemonProcess daemon(RunArgs(s, "30"), s.config.store.postgres);
  daemon.Start();
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= kRandomEvents / 3; }, kPatience))
      << daemon.Log();
  ASSERT_EQ(0, kafka.Run({"stop"}));
  // The relay fails and retries; the daemon keeps running...
  ASSERT_TRUE(WaitUntil([&] { return daemon.Log().find("event=feed_relay_retry") != std::string::npos; },
                        kPatience))
      << daemon.Log();
  EXPECT_TRUE(daemon.Running()) << daemon.Log();
  ASSERT_EQ(0, kafka.Run({"start"}));
  // ...and once the broker is back, everything is applied and published.
  ASSERT_TRUE(WaitUntil([&] { return Done(s, kRandomEvents); }, kPatience)) << daemon.Log();
  EXPECT_NE(std::string::npos, daemon.Log().find("event=feed_relay_recovered")) << daemon.Log();
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  ExpectExactRandomTables(s);
  ExpectTheFeedEqualsTheTables(s);
}

// Two instances share the consumer group and the store; one relay publishes
// (the other stands by) and takes over when the first is killed.
TEST(FeedKafka, TwoInstancesSharingTheGroupPublishEachChangeOnce) {
  FeedSetup s = SetUpFeed(testing::TestKafkaBootstrap(), 4, "  max_messages: 30\n");
  Publish(s, SourcePath("tests/data/article/events-random.jsonl"));
  DaemonProcess a(RunArgs(s, "20"), s.config.store.postgres);
  DaemonProcess b(RunArgs(s, "20"), s.config.store.postgres);
  a.Start();
  ASSERT_TRUE(WaitUntil([&] { return a.Log().find("event=feed_relay_started") != std::string::npos; },
                        kPatience))
      << a.Log();
  b.Start();
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= kRandomEvents / 3; }, kPatience))
      << a.Log() << b.Log();
  EXPECT_NE(std::string::npos, b.Log().find("event=feed_relay_standby")) << b.Log();
  a.Kill();  // the publishing relay dies mid-stream: b's takes over
  ASSERT_TRUE(WaitUntil([&] { return b.Log().find("event=feed_relay_started") != std::string::npos; },
                        kPatience))
      << b.Log();
  ASSERT_TRUE(WaitUntil([&] { return EventsProcessed(s.schema) >= 2 * kRandomEvents / 3; }, kPatience))
      << b.Log();
  a.Start();
  ASSERT_TRUE(WaitUntil([&] { return Done(s, kRandomEvents); }, kPatience))
      << a.Log() << b.Log();
  EXPECT_EQ(0, a.Terminate(30)) << a.Log();
  EXPECT_EQ(0, b.Terminate(30)) << b.Log();
  ExpectExactRandomTables(s);
  ExpectTheFeedEqualsTheTables(s);
}

// The feed topic accepts record batches of at most 4 KiB (below
// feed.max_message_bytes, a misconfiguration); a post's bucket of 100
// comments is larger. The broker refuses its batch inside a transaction; the
// sink goes on with one message per batch, the relay learns exactly which
// changes are too large and publishes markers for them, and nothing stalls.
TEST(FeedKafka, AMessageTheBrokerRefusesBecomesAMarker) {
  FeedSetup s = SetUpFeed(testing::TestKafkaBootstrap(), 1, "", {"max.message.bytes=4096"});
  Publish(s, SourcePath("tests/data/article/events.jsonl"));
  DaemonProcess daemon(RunArgs(s, "5000"), s.config.store.postgres);
  daemon.Start();
  ASSERT_TRUE(WaitUntil([&] { return Done(s, kOrderedEvents); }, kPatience)) << daemon.Log();
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();
  EXPECT_NE(std::string::npos, daemon.Log().find("event=feed_batch_refused")) << daemon.Log();
  EXPECT_NE(std::string::npos, daemon.Log().find("event=feed_change_too_large")) << daemon.Log();
  FeedReplica replica;
  for (const testing::FeedRecord& record : testing::ConsumeFeedTopic(s.brokers, s.feed_topic)) {
    replica.Apply(record);
  }
  EXPECT_EQ(0u, replica.duplicates());
  EXPECT_TRUE(replica.Gaps().empty());
  EXPECT_GT(replica.too_large(), 0u);
  // Every document is on the feed: whole, or as a marker when it is large.
  auto expected = testing::FeedExpectation(s.config);
  for (const auto& collection : expected) {
    for (const auto& doc : collection.second) {
      auto found = replica.documents().count(collection.first)
                       ? replica.documents().at(collection.first).find(doc.first)
                       : std::map<std::string, std::string>::const_iterator();
      ASSERT_TRUE(replica.documents().count(collection.first) &&
                  found != replica.documents().at(collection.first).end())
          << collection.first << " " << doc.first;
      if (found->second.find("\"denormd_too_large\"") != std::string::npos) {
        EXPECT_GT(doc.second.size(), 3000u) << "a small document published as a marker: "
                                            << collection.first << " " << doc.first;
      } else {
        EXPECT_LT(doc.second.size(), 4096u);
      }
    }
  }
}

// Open learns the partitions of every topic the feed writes, the progress
// topic it creates included: a session's first page must not wait for the
// producer to ask for them (librdkafka asks for a new topic's partitions
// only at its once-a-second scan, after a message for it is queued).
TEST(FeedKafka, OpenLearnsThePartitionsOfEveryTopicItWrites) {
  FeedSetup s = SetUpFeed(testing::TestKafkaBootstrap(), 1);
  std::atomic<bool> stopping{false};
  KafkaFeedSink sink(s.config, &stopping);
  FeedProgress progress;
  Status opened = sink.Open(&progress);
  ASSERT_TRUE(opened.ok()) << opened.ToString();
  EXPECT_EQ((std::map<std::string, int>{{s.feed_topic, 3}, {s.config.feed->progress_topic, 1}}),
            sink.partitions());
  sink.Close();
}

}  // namespace
}  // namespace denormd
