// The production topology under faults (issue 31): two `denormd run`
// instances with the change feed on, consuming a topic whose partitions have
// three replicas on a 3-broker KRaft cluster, storing into a PostgreSQL
// primary with a synchronous streaming standby, reached through the
// multi-host connection string with target_session_attrs=read-write
// (scripts/cluster.sh). While the article's random scenario is produced in
// chunks, faults are injected:
//
//   LeaderLoss        kill -9 of the broker leading the input's partition 0
//   StandbyPromoted   kill -9 of the PostgreSQL primary, the standby promoted;
//                     the old primary is then made again as the new standby
//   InstanceKilled    kill -9 of one `denormd run` instance, started again
//   DiskFull          the primary's data filesystem (a tmpfs) filled, held
//                     for 10 s, then freed
//   NetworkPartition  packets to and from PostgreSQL dropped (they vanish
//                     instead of being refused) for 35 s, longer than the
//                     daemon's TCP timeouts, then restored
//
// At the end: the documents equal the scenario's fresh replay
// (expected-random.json), the dead letters are exactly its 7 bad events, the
// feed topic holds every sequence number once and equals the tables. For
// each fault the time from the fault (from its end, for the partition and the
// disk) to the next committed batch is printed: a figure, not an assertion
// (targets: 10 s after a broker loss, 30 s after a promotion or a healed
// partition); a bound of minutes only stops a hung test.
//
// AllFaultsInRandomOrder injects every fault, shuffled (DENORMD_FAULT_SEED
// repeats an order); DENORMD_FAULT_ROUNDS=N (default 1) does it N times over
// the same scenario: the longer mode.
//
// Ports: DENORMD_TEST_FAULT_KAFKA_PORT (default 19600: 19600, 19610, 19620
// and +1 each) and DENORMD_TEST_FAULT_PG_PORT (default 15490 and 15491).
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::DaemonProcess;
using testing::SourcePath;
using testing::Sql;

constexpr uint64_t kRandomEvents = 3343;  // lines of events-random.jsonl
constexpr int kPatience = 300;            // seconds before a wait counts as hung
constexpr int kPartitions = 4;            // of the input topic

enum class Fault { kLeaderLoss, kStandbyPromoted, kInstanceKilled, kDiskFull, kNetworkPartition };

const char* FaultName(Fault fault) {
  switch (fault) {
    case Fault::kLeaderLoss: return "LeaderLoss";
    case Fault::kStandbyPromoted: return "StandbyPromoted";
    case Fault::kInstanceKilled: return "InstanceKilled";
    case Fault::kDiskFull: return "DiskFull";
    case Fault::kNetworkPartition: return "NetworkPartition";
  }
  return "?";
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// scripts/cluster.sh with the test's state dir and ports; its exit code,
// stdout and stderr together in *output.
class Cluster {
 public:
  Cluster() {
    state_ = std::string(::testing::TempDir()) + "/denormd-faults-" + std::to_string(getpid());
    kafka_port_ = std::stoi(EnvOr("DENORMD_TEST_FAULT_KAFKA_PORT", "19600"));
    pg_port_ = std::stoi(EnvOr("DENORMD_TEST_FAULT_PG_PORT", "15490"));
  }

  // `args`: words separated by spaces (e.g. "partition postgres cut").
  int Run(const std::string& args, std::string* output = nullptr) const {
    std::vector<std::string> words;
    std::istringstream in(args);
    for (std::string word; in >> word;) words.push_back(word);
    std::string text;
    const int code = testing::RunScript("cluster.sh", words,
                                        {{"DENORMD_CLUSTER_STATE_DIR", state_},
                                         {"DENORMD_CLUSTER_KAFKA_PORT", std::to_string(kafka_port_)},
                                         {"DENORMD_CLUSTER_PG_PORT", std::to_string(pg_port_)},
                                         {"DENORMD_CLUSTER_PG_DISK_MB", "256"}},
                                        &text, testing::ScriptStderr::kKeep);
    if (output != nullptr) *output = text;
    return code;
  }

  int BrokerPort(int node) const { return kafka_port_ + 10 * (node - 1); }
  // What `cluster.sh env` says a client uses: the brokers' bootstrap list and
  // the multi-host connection string.
  std::string Brokers() const { return Env("DENORMD_KAFKA_BROKERS"); }
  std::string PostgresUrl() const { return Env("DENORMD_POSTGRES"); }

  // scripts/kafka.sh against a running broker (`node`), with the cluster's
  // replication for the topics it creates.
  int Kafka(int node, const std::vector<std::string>& args, std::string* output) const {
    return testing::RunScript(
        "kafka.sh", args,
        {{"DENORMD_STATE_DIR", state_ + "/kafka-" + std::to_string(node)},
         {"DENORMD_KAFKA_PORT", std::to_string(BrokerPort(node))},
         {"DENORMD_KAFKA_REPLICATION", "3"}},
        output);
  }

  // The node leading partition 0 of `topic` (0 when no live broker says).
  int Leader(const std::string& topic) const {
    for (int node = 1; node <= 3; ++node) {
      std::string describe;
      if (Kafka(node, {"describe", topic}, &describe) != 0) continue;
      const size_t line = describe.find("Partition: 0");
      if (line == std::string::npos) continue;
      const size_t at = describe.find("Leader: ", line);
      if (at == std::string::npos) continue;
      return std::atoi(describe.c_str() + at + 8);
    }
    return 0;
  }

 private:
  // NAME's value in `cluster.sh env` (lines `export NAME=value`, the value
  // possibly in single quotes); read once.
  std::string Env(const std::string& name) const {
    if (env_.empty()) {
      std::string text;
      EXPECT_EQ(0, Run("env", &text)) << text;
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind("export ", 0) != 0 || line.find('=') == std::string::npos) continue;
        const size_t eq = line.find('=');
        std::string value = line.substr(eq + 1);
        if (value.size() >= 2 && value.front() == '\'' && value.back() == '\'') {
          value = value.substr(1, value.size() - 2);
        }
        env_[line.substr(7, eq - 7)] = value;
      }
    }
    const auto it = env_.find(name);
    EXPECT_NE(it, env_.end()) << "cluster.sh env does not set " << name;
    return it == env_.end() ? std::string() : it->second;
  }

  std::string state_;
  int kafka_port_;
  int pg_port_;
  mutable std::map<std::string, std::string> env_;
};

// When the input last moved: the last committed batch of `schema` and the
// oldest of its partitions' last commits (seconds since the epoch), or
// nothing while the store does not answer (no test failure: the store is
// expected to be away during a fault).
struct LastCommits {
  double first = 0;  // the oldest of the partitions' commits at or after `since` (0: none)
  double every = 0;  // the oldest partition's newest commit (0 before all have one)
};
std::optional<LastCommits> LastCommit(const std::string& url, const std::string& schema,
                                      int partitions, double since) {
  try {
    pqxx::connection connection(url + "&connect_timeout=2");
    pqxx::nontransaction work(connection);
    // A partition has a row per lane (projections/lanes.h): its commit after
    // `since` is its lanes' oldest such, its newest commit its lanes' newest.
    const std::string after = "to_timestamp(" + std::to_string(since) + ")";
    pqxx::row row = work.exec1(
        "select coalesce(extract(epoch from min(first_after)), 0), case when count(*) = " +
        std::to_string(partitions) + " then extract(epoch from min(newest)) else 0 end from "
        "(select min(updated_at) filter (where updated_at >= " + after + ") as first_after, "
        "max(updated_at) as newest from " + schema + ".positions group by source, partition) "
        "as per_partition");
    return LastCommits{row[0].as<double>(), row[1].as<double>()};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Events of `schema` accounted for in committed batches, or nothing while
// the store does not answer.
std::optional<uint64_t> Processed(const std::string& url, const std::string& schema) {
  try {
    pqxx::connection connection(url + "&connect_timeout=2");
    pqxx::nontransaction work(connection);
    return work.exec1("select coalesce(sum(applied + stale + dead), 0) from " + schema +
                      ".positions")[0].as<uint64_t>();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

class ProductionFaults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster();
    std::string output;
    cluster_->Run("clean");
    std::string first;
    if (cluster_->Run("start", &first) == 0) return;
    // Once more: a port of the previous run may not be free yet.
    cluster_->Run("clean");
    if (cluster_->Run("start", &output) != 0) {
      // Failed in SetUp, not here: a failure here would show as tests skipped.
      cluster_error_ = "scripts/cluster.sh start failed twice:\n" + first + "\n" + output;
    }
  }
  static void TearDownTestSuite() {
    cluster_->Run("clean");
    delete cluster_;
    cluster_ = nullptr;
  }

  void SetUp() override {
    ASSERT_EQ("", cluster_error_);
    // Sql(), ReadCollections() and the daemons reach the primary, wherever it is.
    setenv("DENORMD_TEST_POSTGRES", cluster_->PostgresUrl().c_str(), 1);
    schema_ = testing::TestSchemaName();
    topic_ = schema_ + "_" + std::to_string(getpid());
    feed_topic_ = topic_ + "_docs";
    testing::LoadTestConfig("tests/data/article/config.yaml", schema_);  // drops the schema
    config_file_ = testing::WriteKafkaArticleConfig(schema_, cluster_->Brokers(), topic_);
    {
      std::ofstream out(config_file_, std::ios::app);
      out << "feed:\n  topic: " << feed_topic_ << "\n  transactional_id: " << topic_ << "-feed\n";
    }
    std::vector<ConfigError> errors;
    std::optional<Config> config = LoadConfig(config_file_, &errors);
    for (const ConfigError& e : errors) ADD_FAILURE() << e.ToString(config_file_);
    ASSERT_TRUE(config.has_value());
    config_ = *config;
    config_.store.postgres = cluster_->PostgresUrl();
    std::string output;
    ASSERT_EQ(0, cluster_->Kafka(Live(), {"topic-create", topic_, std::to_string(kPartitions)}, &output)) << output;
    ASSERT_EQ(0, cluster_->Kafka(Live(), {"topic-create", feed_topic_, "3"}, &output)) << output;
    for (int i = 0; i < 2; ++i) {
      instances_.push_back(std::make_unique<DaemonProcess>(
          std::vector<std::string>{"run", "-c", config_file_, "--batch-size", "50"},
          cluster_->PostgresUrl()));
      instances_.back()->Start();
    }
  }

  void TearDown() override {
    for (auto& instance : instances_) {
      if (instance->Running()) instance->Terminate(30);
    }
    // Whatever a failed test left behind, the next one starts whole.
    cluster_->Run("partition postgres heal");
    cluster_->Run("disk free");
    for (int node = 1; node <= 3; ++node) {
      cluster_->Run("broker " + std::to_string(node) + " start");
    }
    if (cluster_->Run("status") != 0) cluster_->Run("rejoin");
  }

  // A broker that is running (the first of 1..3 whose status says so).
  int Live() const {
    for (int node = 1; node <= 3; ++node) {
      std::string output;
      if (cluster_->Kafka(node, {"status"}, &output) == 0) return node;
    }
    return 1;
  }

  // Publishes lines [begin, end) of the random scenario to the input topic.
  void Publish(const std::vector<std::string>& lines, size_t begin, size_t end) {
    if (begin >= end) return;
    const std::string path = testing::WriteTempFile(
        "chunk-" + std::to_string(begin) + ".jsonl", [&] {
          std::string text;
          for (size_t i = begin; i < end; ++i) text += lines[i] + "\n";
          return text;
        }());
    std::string output;
    // Retried: while a leader is re-elected, a produce may time out.
    for (int attempt = 1; attempt <= 5; ++attempt) {
      if (testing::RunDenormd({"publish", "-c", config_file_, path}, &output) == 0) return;
    }
    FAIL() << "publish of lines " << begin << "-" << end << " failed: " << output;
  }

  // Injects `fault` while the instances work, produces the next chunk
  // (`produce`) as soon as it has struck, and returns when it is over (the
  // partition healed, the disk freed, the killed server or instance
  // replaced), having printed the seconds from the fault (its end) to the
  // next committed batch and to every partition of the input committing.
  void Inject(Fault fault, int round, const std::function<void()>& produce) {
    std::vector<size_t> logged;  // what each instance had logged before the fault
    for (const auto& instance : instances_) logged.push_back(instance->Log().size());
    std::string output;
    double since = Now();
    switch (fault) {
      case Fault::kLeaderLoss: {
        const int leader = cluster_->Leader(topic_);
        ASSERT_NE(0, leader) << "no leader for " << topic_;
        since = Now();
        ASSERT_EQ(0, cluster_->Run("broker " + std::to_string(leader) + " kill", &output)) << output;
        produce();
        AwaitCommitAfter(fault, since);
        ASSERT_EQ(0, cluster_->Run("broker " + std::to_string(leader) + " start", &output))
            << output;
        break;
      }
      case Fault::kStandbyPromoted: {
        std::string primary;
        ASSERT_EQ(0, cluster_->Run("primary", &primary)) << primary;
        primary = primary.substr(0, primary.find('\n'));
        since = Now();
        ASSERT_EQ(0, cluster_->Run("postgres " + primary + " kill", &output)) << output;
        ASSERT_EQ(0, cluster_->Run("promote", &output)) << output;
        produce();
        AwaitCommitAfter(fault, since);
        ASSERT_EQ(0, cluster_->Run("rejoin", &output)) << output;
        break;
      }
      case Fault::kInstanceKilled: {
        DaemonProcess& victim = *instances_[round % instances_.size()];
        since = Now();
        victim.Kill();
        produce();
        AwaitCommitAfter(fault, since);
        victim.Start();
        break;
      }
      case Fault::kDiskFull: {
        ASSERT_EQ(0, cluster_->Run("disk fill", &output)) << output;
        produce();
        std::this_thread::sleep_for(std::chrono::seconds(10));  // the fault's length
        ASSERT_EQ(0, cluster_->Run("disk free", &output)) << output;
        AwaitCommitAfter(fault, Now());
        break;
      }
      case Fault::kNetworkPartition: {
        ASSERT_EQ(0, cluster_->Run("partition postgres cut", &output)) << output;
        produce();
        std::this_thread::sleep_for(std::chrono::seconds(35));  // the fault's length
        ASSERT_EQ(0, cluster_->Run("partition postgres heal", &output)) << output;
        AwaitCommitAfter(fault, Now());
        break;
      }
    }
    for (auto& instance : instances_) {
      EXPECT_TRUE(instance->Running()) << "an instance exited:\n" << instance->Log();
    }
    // The fault was felt: the instances logged what an operator would see.
    // Some signs come after the batches resume (an instance killed while it
    // held no work: the group rebalances only after its session timeout, or
    // when it rejoins), so they are waited for.
    std::string after;
    auto logged_since = [&] {
      after.clear();
      for (size_t i = 0; i < instances_.size(); ++i) {
        const std::string log = instances_[i]->Log();
        after += log.size() >= logged[i] ? log.substr(logged[i]) : log;
      }
    };
    std::vector<std::string> signs;
    switch (fault) {
      case Fault::kLeaderLoss: signs = {"event=kafka_error"}; break;
      case Fault::kStandbyPromoted:
      case Fault::kNetworkPartition:
        signs = {"event=batch_retry", "event=positions_unavailable", "event=feed_relay_retry"};
        break;
      case Fault::kInstanceKilled: signs = {"event=partitions_assigned"}; break;
      case Fault::kDiskFull: signs = {"No space left on device"}; break;
    }
    EXPECT_TRUE(testing::WaitUntil(
        [&] {
          logged_since();
          return std::any_of(signs.begin(), signs.end(), [&](const std::string& sign) {
            return after.find(sign) != std::string::npos;
          });
        },
        kPatience))
        << FaultName(fault) << " left no trace in the logs:\n" << after;
  }

  // Waits for a batch committed after `since` and for every partition of
  // the input to have committed after it; prints both delays.
  void AwaitCommitAfter(Fault fault, double since) {
    double first = 0;
    double every = 0;
    const bool seen = testing::WaitUntil([&] {
      std::optional<LastCommits> last =
          LastCommit(cluster_->PostgresUrl(), schema_, kPartitions, since);
      if (!last) return false;
      if (first == 0 && last->first != 0) first = last->first;
      if (last->every >= since) every = last->every;
      return first != 0 && every != 0;
    }, kPatience);
    ASSERT_TRUE(seen) << "no batch of every partition committed within " << kPatience
                      << " s after " << FaultName(fault) << "\n" << Logs();
    std::printf("[ fault    ] %-17s next committed batch after %.1f s, every partition after %.1f s\n",
                FaultName(fault), first - since, every - since);
    std::fflush(stdout);
  }

  std::string Logs() const {
    std::string out;
    for (const auto& instance : instances_) out += "--- instance\n" + instance->Log();
    return out;
  }

  // Produces the random scenario in chunks: each fault strikes while the
  // instances apply a chunk, and the next chunk is produced as soon as it has
  // struck. Then waits for everything and checks the whole.
  void RunScenarioWith(const std::vector<Fault>& faults) {
    std::vector<std::string> lines;
    {
      std::ifstream in(SourcePath("tests/data/article/events-random.jsonl"));
      for (std::string line; std::getline(in, line);) lines.push_back(line);
    }
    ASSERT_EQ(kRandomEvents, lines.size());
    const size_t chunk = lines.size() / (faults.size() + 1) + 1;
    size_t published = 0;
    uint64_t before_chunk = 0;  // events processed when the last chunk was produced
    auto produce = [&] {
      before_chunk = Processed(cluster_->PostgresUrl(), schema_).value_or(0);
      const size_t end = std::min(lines.size(), published + chunk);
      Publish(lines, published, end);
      published = end;
    };
    produce();
    for (size_t i = 0; i < faults.size(); ++i) {
      // The fault strikes once the instances are at work on the last chunk.
      testing::WaitUntil([&] {
        return Processed(cluster_->PostgresUrl(), schema_).value_or(0) > before_chunk;
      }, 60);
      Inject(faults[i], static_cast<int>(i), produce);
      if (HasFatalFailure()) return;
    }
    Publish(lines, published, lines.size());
    const bool done = testing::WaitUntil([&] {
      return Processed(cluster_->PostgresUrl(), schema_).value_or(0) >= kRandomEvents &&
             Sql("select count(*) from " + schema_ + ".outbox") == std::vector<std::string>{"0"};
    }, kPatience);
    ASSERT_TRUE(done) << Logs();
    for (auto& instance : instances_) EXPECT_EQ(0, instance->Terminate(30)) << instance->Log();

    // The documents: those of a fresh replay of the same events.
    EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(config_),
                                           SourcePath("tests/data/article/expected-random.json")));
    // Every event accounted for once; the dead letters exactly the bad events.
    EXPECT_EQ(std::vector<std::string>({"3277\t59\t7"}),
              Sql("select sum(applied), sum(stale), sum(dead) from " + schema_ + ".positions"));
    EXPECT_EQ(std::vector<std::string>({"7\t7"}),
              Sql("select count(*), count(distinct (source, partition, position)) from " +
                  schema_ + ".dead_letters"));
    // The feed: every sequence number once, equal to the tables.
    testing::ExpectFeedEqualsTables(cluster_->Brokers(), feed_topic_, config_);
  }

  static Cluster* cluster_;
  static std::string cluster_error_;  // why the cluster did not start ("" when it did)
  std::string schema_;
  std::string topic_;
  std::string feed_topic_;
  std::string config_file_;
  Config config_;
  std::vector<std::unique_ptr<DaemonProcess>> instances_;
};

Cluster* ProductionFaults::cluster_ = nullptr;
std::string ProductionFaults::cluster_error_;

TEST_F(ProductionFaults, LeaderLoss) { RunScenarioWith({Fault::kLeaderLoss}); }

TEST_F(ProductionFaults, StandbyPromoted) { RunScenarioWith({Fault::kStandbyPromoted}); }

TEST_F(ProductionFaults, InstanceKilled) { RunScenarioWith({Fault::kInstanceKilled}); }

TEST_F(ProductionFaults, DiskFull) { RunScenarioWith({Fault::kDiskFull}); }

TEST_F(ProductionFaults, NetworkPartition) { RunScenarioWith({Fault::kNetworkPartition}); }

TEST_F(ProductionFaults, AllFaultsInRandomOrder) {
  const std::string seed_text = EnvOr("DENORMD_FAULT_SEED", std::to_string(std::random_device()()));
  const int rounds = std::max(1, std::atoi(EnvOr("DENORMD_FAULT_ROUNDS", "1").c_str()));
  std::vector<Fault> faults;
  std::mt19937 rng(static_cast<uint32_t>(std::stoul(seed_text)));
  for (int round = 0; round < rounds; ++round) {
    std::vector<Fault> all = {Fault::kLeaderLoss, Fault::kStandbyPromoted, Fault::kInstanceKilled,
                              Fault::kDiskFull, Fault::kNetworkPartition};
    std::shuffle(all.begin(), all.end(), rng);
    faults.insert(faults.end(), all.begin(), all.end());
  }
  std::string order;
  for (Fault fault : faults) order += std::string(order.empty() ? "" : ", ") + FaultName(fault);
  std::printf("[ fault    ] DENORMD_FAULT_SEED=%s: %s\n", seed_text.c_str(), order.c_str());
  RunScenarioWith(faults);
}

}  // namespace
}  // namespace denormd
