#include "tests/test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <signal.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <memory>
#include <sstream>

#include <gtest/gtest.h>
#include <librdkafka/rdkafkacpp.h>

#include "connectors/postgres_store.h"
#include "daemon/feed_relay.h"
#include "projections/document_set.h"
#include "projections/json.h"
#include "projections/maintenance.h"

namespace denormd {
namespace testing {

std::string SourcePath(const std::string& relative) {
  return std::string(DENORMD_SOURCE_DIR) + "/" + relative;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void PrintTo(const ArticleScenario& scenario, std::ostream* os) {
  *os << scenario.events << " batch " << scenario.batch_size;
}

std::string ArticleScenarioName(const ArticleScenario& scenario) {
  std::string name =
      std::string(scenario.events).find("random") != std::string::npos ? "Random" : "Ordered";
  return name + "Batch" + std::to_string(scenario.batch_size);
}

std::vector<ArticleScenario> AllArticleScenarios() {
  std::vector<ArticleScenario> out;
  for (const auto& files : {std::make_pair("events.jsonl", "expected.json"),
                            std::make_pair("events-random.jsonl", "expected-random.json")}) {
    for (size_t batch : {1, 7, 5000}) out.push_back({files.first, files.second, batch});
  }
  return out;
}

std::string DiffCollections(const Collections& actual, const std::string& expected_file) {
  DocumentSet expected;
  Status status = ParseDocumentSet(ReadFile(expected_file), &expected);
  if (!status.ok()) return expected_file + ": " + status.ToString();
  DocumentSet have;
  have.collections = actual;
  have.buckets = expected.buckets;  // the shapes the file was written for
  expected.dead.reset();            // the collections only
  expected.stale.reset();
  std::string out;
  for (const std::string& line : DiffDocumentSets(have, expected)) out += line + "\n";
  return out;
}

void ExpectedCounts(const std::string& expected_file, uint64_t* stale, uint64_t* dead) {
  JsonDocument expected;
  ASSERT_TRUE(ParseJson(ReadFile(expected_file), &expected).ok());
  *stale = expected["stale"].GetUint64();
  *dead = expected["dead"].GetUint64();
}

std::string TestPostgresUrl() {
  const char* url = std::getenv("DENORMD_TEST_POSTGRES");
  if (url == nullptr || *url == '\0') {
    ADD_FAILURE() << "DENORMD_TEST_POSTGRES is not set: run the suite with scripts/test.sh, "
                     "or start scripts/postgres.sh and export its URL";
    return "postgresql://127.0.0.1:1/unset";
  }
  return url;
}

std::string TestSchemaName() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string raw = std::string("t_") + info->test_suite_name() + "_" + info->name();
  std::string name;
  for (char c : raw) {
    name += std::isalnum(static_cast<unsigned char>(c)) ? std::tolower(c) : '_';
  }
  if (name.size() > 63) {
    // Keep it unique: a hash of the whole name replaces the tail.
    std::string hash = std::to_string(std::hash<std::string>()(name) % 100000000);
    name = name.substr(0, 63 - hash.size() - 1) + "_" + hash;
  }
  return name;
}

std::vector<std::string> Sql(const std::string& statement) {
  Config config;
  config.store.schema = "public";
  PostgresStore store(config, TestPostgresUrl());
  std::vector<std::string> rows;
  Status status = store.Execute(statement, &rows);
  EXPECT_TRUE(status.ok()) << statement << ": " << status.ToString();
  return rows;
}

std::string StorageOptions(const std::string& qualified_table) {
  std::vector<std::string> rows = Sql(
      "select coalesce(array_to_string(c.reloptions, ','), '') || ' | ' ||"
      " coalesce(array_to_string(t.reloptions, ','), '') from pg_class c"
      " left join pg_class t on t.oid = c.reltoastrelid where c.oid = '" + qualified_table +
      "'::regclass");
  return rows.empty() ? "(no such table)" : rows[0];
}

const char* const kChurnTableOptions =
    "autovacuum_vacuum_scale_factor=0.01,autovacuum_vacuum_threshold=1000,"
    "autovacuum_vacuum_cost_delay=0,autovacuum_analyze_scale_factor=0.02 | "
    "autovacuum_vacuum_scale_factor=0.01,autovacuum_vacuum_threshold=1000,"
    "autovacuum_vacuum_cost_delay=0";

uint64_t SqlCount(const std::string& statement) {
  std::vector<std::string> rows = Sql(statement);
  return rows.empty() ? 0 : std::strtoull(rows[0].c_str(), nullptr, 10);
}

bool SomeoneWaitsFor(const std::string& xid) {
  return SqlCount("select count(*) from pg_locks where locktype = 'transactionid' and not granted"
                  " and transactionid::text = '" + xid + "'") > 0;
}

void OnOwnConnections(const Config& config, const std::string& phase,
                      const std::function<void(Engine&)>& body) {
  const std::string name = config.store.schema.substr(0, 40) + "_" + phase;
  {
    const std::string url = TestPostgresUrl();
    Engine engine(config, url + (url.find('?') == std::string::npos ? "?" : "&") +
                              "application_name=" + name);
    Status status = engine.store.Open();
    ASSERT_TRUE(status.ok()) << status.ToString();
    body(engine);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (SqlCount("select count(*) from pg_stat_activity where application_name = '" + name +
                  "'") > 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << name << " never disconnected";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

uint64_t TableBlocksRead(const std::string& schema, const std::string& table) {
  return SqlCount(
      "select coalesce(heap_blks_read, 0) + coalesce(heap_blks_hit, 0) +"
      " coalesce(idx_blks_read, 0) + coalesce(idx_blks_hit, 0) from pg_statio_user_tables"
      " where schemaname = '" + schema + "' and relname = '" + table + "'");
}

std::thread ApplyOnThread(Engine& engine, std::vector<RawRecord> records, Status* status,
                          BatchStats* stats) {
  return std::thread([&engine, records = std::move(records), status, stats] {
    *status = engine.applier.Apply(&engine.store, DecodeBatch(engine.decoder, records), stats);
  });
}

uint64_t EventsProcessed(const std::string& schema) {
  std::vector<std::string> rows = Sql("select to_regclass('" + schema + ".positions') is null");
  if (rows.empty() || rows[0] == "t") return 0;
  return SqlCount("select coalesce(sum(applied + stale + dead), 0) from " + schema + ".positions");
}

Config LoadTestConfig(const std::string& relative_path, const std::string& schema) {
  std::vector<ConfigError> errors;
  std::optional<Config> config = LoadConfig(SourcePath(relative_path), &errors);
  for (const ConfigError& error : errors) ADD_FAILURE() << error.ToString(relative_path);
  if (!config) return Config();
  config->store.schema = schema;
  config->store.postgres = TestPostgresUrl();
  Sql("drop schema if exists " + schema + " cascade");
  return *config;
}

std::string ArticleConfigFile(Config* config) {
  std::string schema = TestSchemaName();
  *config = LoadTestConfig("tests/data/article/config.yaml", schema);
  std::string text = ReadFile(SourcePath("tests/data/article/config.yaml"));
  size_t at = text.find("schema: article");
  EXPECT_NE(std::string::npos, at);
  text.replace(at, std::string("schema: article").size(), "schema: " + schema);
  return WriteTempFile("config.yaml", text);
}

Config ConfigOnTestDatabase(const std::string& yaml) {
  std::vector<ConfigError> errors;
  std::optional<Config> config = ParseConfig(yaml, "test.yaml", &errors);
  for (const ConfigError& error : errors) ADD_FAILURE() << error.ToString("test.yaml");
  if (!config) return Config();
  config->store.schema = TestSchemaName();
  config->store.postgres = TestPostgresUrl();
  Sql("drop schema if exists " + config->store.schema + " cascade");
  return *config;
}

namespace {

Config AdjustedConfig(Config config, const std::function<void(Config*)>& adjust) {
  if (adjust) adjust(&config);
  return config;
}

}  // namespace

void UsePackedBuckets(Config* config) {
  for (ProjectionConfig& projection : config->projections) {
    projection.layout = ProjectionConfig::BucketLayout::kPacked;
  }
}

ArticleOnPostgres::ArticleOnPostgres(const std::function<void(Config*)>& adjust)
    : Engine(AdjustedConfig(LoadTestConfig("tests/data/article/config.yaml", TestSchemaName()),
                            adjust),
             TestPostgresUrl()) {
  Status status = store.Open();
  EXPECT_TRUE(status.ok()) << status.ToString();
}

RawRecord LogRecord(SourcePosition at, std::string json) {
  RawRecord record;
  record.at = std::move(at);
  record.value = std::move(json);
  return record;
}

Config ParseTestConfig(const std::string& yaml) {
  std::vector<ConfigError> errors;
  std::optional<Config> config = ParseConfig(yaml, "test.yaml", &errors);
  for (const ConfigError& error : errors) ADD_FAILURE() << error.ToString("test.yaml");
  return config ? *config : Config();
}

InMemory::InMemory(const std::string& yaml, PlanOptions options) {
  std::vector<ConfigError> errors;
  config_ = ParseConfig(yaml, "test.yaml", &errors);
  for (const ConfigError& error : errors) ADD_FAILURE() << error.ToString("test.yaml");
  if (!config_) config_ = Config();
  plan_ = std::make_unique<ProjectionPlan>(*config_, options);
  applier_ = std::make_unique<BatchApplier>(*plan_);
  decoder_ = std::make_unique<NativeDecoder>(*config_);
}

BatchStats InMemory::Apply(const std::vector<std::string>& events) {
  BatchStats stats;
  Status status = TryApply(events, &stats);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return stats;
}

Status InMemory::TryApply(const std::vector<std::string>& events, BatchStats* stats) {
  std::vector<RawRecord> records;
  for (const std::string& json : events) records.push_back(LogRecord({"test", 0, ++position_}, json));
  return applier_->Apply(&store_, DecodeBatch(*decoder_, records), stats);
}

std::vector<std::string> InMemory::Differences() {
  std::vector<std::string> differences;
  Status status = Verify(*plan_, &store_, MaintenanceOptions(), &differences);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return differences;
}

BatchStats InMemory::Rebuild() {
  BatchStats stats;
  Status status = denormd::Rebuild(*plan_, &store_, MaintenanceOptions(), &stats);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return stats;
}

Collections ReadCollections(const Config& config) {
  Collections out;
  for (const std::string& collection : config.CollectionNames()) {
    auto& docs = out[collection];
    for (const std::string& row :
         Sql("select id, doc::text from " + config.store.schema + "." + collection)) {
      size_t tab = row.find('\t');
      docs[row.substr(0, tab)] = row.substr(tab + 1);
    }
  }
  return out;
}

int RunDenormd(const std::vector<std::string>& args, std::string* output) {
  std::string command = "DENORMD_POSTGRES='" + TestPostgresUrl() + "' '" DENORMD_BINARY "'";
  for (const std::string& arg : args) {
    std::string quoted;
    for (char c : arg) {
      if (c == '\'') {
        quoted += "'\\''";
      } else {
        quoted += c;
      }
    }
    command += " '" + quoted + "'";
  }
  const int code = RunShell(command + " 2>&1", output);
  if (code == -1) ADD_FAILURE() << "cannot run " << command;
  return code;
}

std::string WriteTempFile(const std::string& name, const std::string& text) {
  std::string dir = std::string(::testing::TempDir()) + "/denormd_" + TestSchemaName();
  mkdir(dir.c_str(), 0755);
  std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return path;
}

std::string TestKafkaBootstrap() {
  const char* bootstrap = std::getenv("DENORMD_TEST_KAFKA");
  if (bootstrap == nullptr || *bootstrap == '\0') {
    ADD_FAILURE() << "DENORMD_TEST_KAFKA is not set: run the suite with scripts/test.sh";
    return "127.0.0.1:1";
  }
  return bootstrap;
}

namespace {

std::string ShellQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace

CommandResult RunDenormdWith(const std::vector<std::pair<std::string, std::string>>& env,
                             const std::vector<std::string>& args, const std::string& input) {
  const std::string out = WriteTempFile("stdout", ""), err = WriteTempFile("stderr", "");
  std::string command;
  for (const auto& e : env) command += e.first + "=" + ShellQuote(e.second) + " ";
  command += ShellQuote(DENORMD_BINARY);
  for (const std::string& arg : args) command += " " + ShellQuote(arg);
  command += " >" + ShellQuote(out) + " 2>" + ShellQuote(err);
  command += input.empty() ? " </dev/null" : " <" + ShellQuote(input);
  const int status = std::system(command.c_str());
  CommandResult result;
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = ReadFile(out);
  result.err = ReadFile(err);
  return result;
}

CommandResult RunDenormdOffline(const std::vector<std::string>& args, const std::string& input) {
  return RunDenormdWith({{"DENORMD_POSTGRES", "postgresql://127.0.0.1:1/nowhere"},
                         {"DENORMD_KAFKA_BROKERS", "127.0.0.1:1"}},
                        args, input);
}

int RunShell(const std::string& command, std::string* output) {
  output->clear();
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output->append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int RunScript(const std::string& script, const std::vector<std::string>& args,
              const std::vector<std::pair<std::string, std::string>>& env, std::string* output,
              ScriptStderr script_stderr) {
  std::string command;
  for (const auto& e : env) command += e.first + "=" + ShellQuote(e.second) + " ";
  command += "bash " + ShellQuote(SourcePath("scripts/" + script));
  for (const std::string& arg : args) command += " " + ShellQuote(arg);
  command += script_stderr == ScriptStderr::kKeep ? " 2>&1" : " 2>/dev/null";
  const int code = RunShell(command, output);
  while (!output->empty() && output->back() == '\n') output->pop_back();
  return code;
}

std::string WriteKafkaArticleConfig(const std::string& schema, const std::string& brokers,
                                    const std::string& topic, const std::string& extra_kafka) {
  std::string text = ReadFile(SourcePath("tests/data/article/config.yaml"));
  size_t at = text.find("schema: article");
  text.replace(at, std::string("schema: article").size(), "schema: " + schema);
  size_t begin = text.find("  kafka: {");
  size_t end = text.find('\n', begin);
  std::string kafka = "  kafka:\n    brokers: " + brokers + "\n    topics: [" + topic +
                      "]\n    group: " + schema +
                      "\n    properties: {session.timeout.ms: 6000, heartbeat.interval.ms: 500}\n" +
                      extra_kafka;
  text.replace(begin, end - begin + 1, kafka);
  return WriteTempFile(schema + ".yaml", text);
}

PrivateKafka::PrivateKafka() {
  port_ = 21000 + (getpid() % 500) * 2;
  state_ = std::string(::testing::TempDir()) + "/denormd-kafka-" + std::to_string(getpid());
  env_ = {{"DENORMD_STATE_DIR", state_}, {"DENORMD_KAFKA_PORT", std::to_string(port_)}};
}

PrivateKafka::~PrivateKafka() {
  std::string output;
  RunScript("kafka.sh", {"stop"}, env_, &output);
  std::system(("rm -rf '" + state_ + "'").c_str());
}

int PrivateKafka::Run(const std::vector<std::string>& args) {
  std::string output;
  return RunScript("kafka.sh", args, env_, &output);
}

int DaemonProcess::counter_ = 0;

DaemonProcess::DaemonProcess(std::vector<std::string> args, std::string postgres_url)
    : args_(std::move(args)), postgres_url_(std::move(postgres_url)) {
  log_path_ = WriteTempFile("daemon-" + std::to_string(getpid()) + "-" +
                                std::to_string(counter_++) + ".log",
                            "");
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) Kill();
}

void DaemonProcess::SetEnv(const std::string& name, const std::string& value) {
  env_.emplace_back(name, value);
}

void DaemonProcess::Start() {
  ASSERT_LE(pid_, 0) << "already running";
  pid_ = fork();
  ASSERT_GE(pid_, 0);
  if (pid_ == 0) {
    FILE* log = std::fopen(log_path_.c_str(), "a");
    if (log != nullptr) {
      dup2(fileno(log), STDOUT_FILENO);
      dup2(fileno(log), STDERR_FILENO);
    }
    setenv("DENORMD_POSTGRES", postgres_url_.c_str(), 1);
    for (const auto& entry : env_) setenv(entry.first.c_str(), entry.second.c_str(), 1);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(DENORMD_BINARY));
    for (std::string& arg : args_) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execv(DENORMD_BINARY, argv.data());
    _exit(127);
  }
}

void DaemonProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

int DaemonProcess::Terminate(int seconds) {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  bool exited = WaitUntil([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, seconds);
  if (!exited) {
    Kill();
    return -1;
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool DaemonProcess::Running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

std::string DaemonProcess::Log() const {
  std::ifstream in(log_path_);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      ssize_t n;
      while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
    }
  }
  close(fd);
  return response;
}

NotifyListener::NotifyListener(bool abstract) {
  static int counter = 0;
  const std::string name =
      "denormd-notify-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  path_ = abstract ? "@" + name : "/tmp/" + name;  // short: sun_path holds 108 bytes
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path_.data(), path_.size());
  if (abstract) address.sun_path[0] = '\0';
  if (!abstract) unlink(path_.c_str());
  const socklen_t length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path_.size() + (abstract ? 0 : 1));
  EXPECT_EQ(0, bind(fd_, reinterpret_cast<sockaddr*>(&address), length)) << std::strerror(errno);
}

NotifyListener::~NotifyListener() {
  close(fd_);
  if (path_[0] == '/') unlink(path_.c_str());
}

std::string NotifyListener::Receive(int ms) {
  pollfd p = {fd_, POLLIN, 0};
  if (poll(&p, 1, ms) != 1) return "";
  char buffer[4096];
  const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
  if (n <= 0) return "";
  received_.emplace_back(buffer, n);
  return received_.back();
}

void NotifyListener::Drain() {
  while (!Receive(0).empty()) {
  }
}

bool NotifyListener::ReceiveUntil(const std::function<bool(const std::string&)>& match,
                                  int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string message = Receive(100);
    if (!message.empty() && match(message)) return true;
  }
  return false;
}

FeedReplica ExpectFeedEqualsTables(const std::string& brokers, const std::string& feed_topic,
                                   const Config& config) {
  FeedReplica replica;
  for (const FeedRecord& record : ConsumeFeedTopic(brokers, feed_topic)) {
    replica.Apply(record);
  }
  EXPECT_GT(replica.records(), 0u);
  EXPECT_EQ(0u, replica.duplicates()) << "sequence numbers seen twice";
  EXPECT_EQ(0u, replica.reorders()) << "keys that went back to an older document";
  std::vector<uint64_t> gaps = replica.Gaps();
  EXPECT_TRUE(gaps.empty()) << "first missing sequence number: " << (gaps.empty() ? 0 : gaps[0]);
  EXPECT_EQ(replica.records(), replica.max_sequence());
  EXPECT_EQ("", replica.Diff(FeedExpectation(config)));
  // What the relay recorded agrees with what is on the topic.
  EXPECT_EQ(std::to_string(replica.max_sequence()),
            Sql("select sequence from " + config.store.schema + ".feed_state")[0]);
  return replica;
}

bool WaitUntil(const std::function<bool()>& condition, int seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    usleep(20000);
  }
  return condition();
}

}  // namespace testing
}  // namespace denormd

// ---------------------------------------------------------------------------
// The change feed.

namespace denormd {
namespace testing {

std::string FeedRecord::Header(const std::string& name) const {
  for (const auto& header : headers) {
    if (header.first == name) return header.second;
  }
  return "";
}

void FeedReplica::Apply(const FeedRecord& record) {
  ++records_;
  const std::string collection = record.Header(kFeedCollectionHeader);
  const std::string sequence_text = record.Header(kFeedSequenceHeader);
  EXPECT_FALSE(collection.empty()) << "a record without " << kFeedCollectionHeader;
  EXPECT_FALSE(sequence_text.empty()) << "a record without " << kFeedSequenceHeader;
  const uint64_t sequence = std::strtoull(sequence_text.c_str(), nullptr, 10);
  if (!seen_.insert(sequence).second) ++duplicates_;
  uint64_t& last = last_sequence_[{collection, record.key}];
  if (sequence <= last) ++reorders_;
  last = std::max(last, sequence);
  if (!record.Header(kFeedTooLargeHeader).empty()) ++too_large_;
  if (record.value) {
    documents_[collection][record.key] = *record.value;
  } else {
    documents_[collection].erase(record.key);
  }
}

std::string FeedReplica::Diff(
    const std::map<std::string, std::map<std::string, std::string>>& expected) const {
  std::ostringstream diff;
  std::set<std::string> collections;
  for (const auto& entry : expected) collections.insert(entry.first);
  for (const auto& entry : documents_) collections.insert(entry.first);
  static const std::map<std::string, std::string> kNone;
  for (const std::string& collection : collections) {
    auto e = expected.find(collection);
    auto a = documents_.find(collection);
    const auto& want = e == expected.end() ? kNone : e->second;
    const auto& have = a == documents_.end() ? kNone : a->second;
    for (const auto& doc : want) {
      auto it = have.find(doc.first);
      if (it == have.end()) {
        diff << collection << " " << doc.first << ": missing on the feed\n";
        continue;
      }
      JsonDocument x, y;
      if (!ParseJson(it->second, &x).ok() || !ParseJson(doc.second, &y).ok() ||
          !JsonEquals(x, y)) {
        diff << collection << " " << doc.first << ": feed " << it->second << "\n    table "
             << doc.second << "\n";
      }
    }
    for (const auto& doc : have) {
      if (!want.count(doc.first)) {
        diff << collection << " " << doc.first << ": on the feed only: " << doc.second << "\n";
      }
    }
  }
  return diff.str();
}

std::vector<uint64_t> FeedReplica::Gaps() const {
  std::vector<uint64_t> gaps;
  uint64_t next = 1;
  for (uint64_t sequence : seen_) {
    while (next < sequence && gaps.size() < 100) gaps.push_back(next++);
    next = sequence + 1;
  }
  return gaps;
}

Status FakeFeedSink::Open(FeedProgress* progress) {
  open_ = true;
  ++opens;
  if (committed_progress) *progress = *committed_progress;
  return Status::Ok();
}

Status FakeFeedSink::Publish(const std::vector<FeedMessage>& messages,
                             const FeedProgress& progress, std::vector<int64_t>* too_large) {
  if (!open_) return Status::Transient("publish on a sink that is not open");
  for (const FeedMessage& m : messages) {
    if (m.value && m.value->size() > refuse_larger_than) too_large->push_back(m.outbox_seq);
  }
  if (!too_large->empty()) return Status::InvalidInput("too large");
  if (fail_before_commit > 0) {
    --fail_before_commit;
    open_ = false;
    return Status::Transient("broker away before the commit");
  }
  for (const FeedMessage& m : messages) records.push_back({m.topic, 0, m.key, m.value, m.headers});
  committed_progress = progress;
  ++transactions;
  if (fail_after_commit > 0) {
    --fail_after_commit;
    open_ = false;
    return Status::Transient("the commit's outcome is unknown (it committed)");
  }
  return Status::Ok();
}

std::map<std::string, std::map<std::string, std::string>> FeedExpectation(const Config& config) {
  std::map<std::string, std::map<std::string, std::string>> out;
  for (const std::string& collection : config.PublishedCollections()) {
    auto& docs = out[collection];
    const bool partitioned = config.HasPartitionKey(collection);
    for (const std::string& row :
         Sql("select id, coalesce(pk, ''), pk is null, doc::text from " + config.store.schema +
             "." + collection)) {
      std::vector<std::string> fields;
      size_t start = 0;
      for (int i = 0; i < 3; ++i) {
        size_t tab = row.find('\t', start);
        fields.push_back(row.substr(start, tab - start));
        start = tab + 1;
      }
      std::optional<std::string> pk;
      if (fields[2] != "t") pk = fields[1];
      docs[FeedKey(partitioned, pk, fields[0])] = row.substr(start);
    }
  }
  return out;
}

std::map<std::string, std::map<std::string, std::string>> FeedExpectation(
    const Config& config, const MemoryState& state) {
  std::map<std::string, std::map<std::string, std::string>> out;
  for (const std::string& collection : config.PublishedCollections()) {
    auto& docs = out[collection];
    auto found = state.collections.find(collection);
    if (found == state.collections.end()) continue;
    const bool partitioned = config.HasPartitionKey(collection);
    for (const auto& doc : found->second) {
      docs[FeedKey(partitioned, doc.second.pk, doc.second.id)] = doc.second.json;
    }
  }
  return out;
}

std::vector<FeedRecord> ConsumeFeedTopic(const std::string& brokers, const std::string& topic,
                                         int seconds) {
  std::vector<FeedRecord> out;
  std::string error;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  for (const auto& p : std::vector<std::pair<std::string, std::string>>{
           {"bootstrap.servers", brokers},
           {"group.id", "feed-test-reader"},  // assign only: never joins
           {"isolation.level", "read_committed"},
           {"enable.auto.commit", "false"},
           {"log_level", "3"}}) {
    EXPECT_EQ(RdKafka::Conf::CONF_OK, conf->set(p.first, p.second, error)) << error;
  }
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(RdKafka::KafkaConsumer::create(conf.get(), error));
  if (!consumer) {
    ADD_FAILURE() << "cannot create a consumer: " << error;
    return out;
  }
  std::unique_ptr<RdKafka::Topic> handle(RdKafka::Topic::create(consumer.get(), topic, nullptr, error));
  RdKafka::Metadata* raw = nullptr;
  RdKafka::ErrorCode err = consumer->metadata(false, handle.get(), &raw, 10000);
  std::unique_ptr<RdKafka::Metadata> metadata(raw);
  if (err != RdKafka::ERR_NO_ERROR || metadata->topics()->empty()) {
    ADD_FAILURE() << "no metadata for " << topic << ": " << RdKafka::err2str(err);
    return out;
  }
  std::map<int32_t, int64_t> high;
  std::vector<RdKafka::TopicPartition*> assignment;
  for (const RdKafka::PartitionMetadata* partition : *metadata->topics()->at(0)->partitions()) {
    int64_t low = 0, end = 0;
    err = consumer->query_watermark_offsets(topic, partition->id(), &low, &end, 10000);
    EXPECT_EQ(RdKafka::ERR_NO_ERROR, err) << RdKafka::err2str(err);
    high[partition->id()] = end;
    assignment.push_back(
        RdKafka::TopicPartition::create(topic, partition->id(), RdKafka::Topic::OFFSET_BEGINNING));
  }
  consumer->assign(assignment);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (true) {
    std::unique_ptr<RdKafka::Message> message(consumer->consume(200));
    if (message->err() == RdKafka::ERR_NO_ERROR) {
      FeedRecord record;
      record.topic = message->topic_name();
      record.partition = message->partition();
      if (message->key() != nullptr) record.key = *message->key();
      if (message->payload() != nullptr) {
        record.value.emplace(static_cast<const char*>(message->payload()), message->len());
      }
      if (RdKafka::Headers* headers = message->headers()) {
        for (const RdKafka::Headers::Header& header : headers->get_all()) {
          record.headers.emplace_back(
              header.key(), header.value() == nullptr
                                ? std::string()
                                : std::string(static_cast<const char*>(header.value()),
                                              header.value_size()));
        }
      }
      out.push_back(std::move(record));
      continue;
    }
    consumer->position(assignment);
    bool done = true;
    for (const RdKafka::TopicPartition* p : assignment) {
      if (high[p->partition()] > 0 && p->offset() < high[p->partition()]) done = false;
    }
    if (done) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "the feed topic " << topic << " was not read to its end in " << seconds
                    << " s (" << out.size() << " records read)";
      break;
    }
  }
  RdKafka::TopicPartition::destroy(assignment);
  consumer->close();
  return out;
}

}  // namespace testing
}  // namespace denormd
