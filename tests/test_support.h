// Shared helpers for the test executables.
#ifndef DENORMD_TESTS_TEST_SUPPORT_H_
#define DENORMD_TESTS_TEST_SUPPORT_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "config/config.h"
#include "connectors/feed_sink.h"
#include "connectors/postgres_admin.h"
#include "connectors/postgres_store.h"
#include "daemon/engine.h"
#include "formats/format_registry.h"
#include "formats/record.h"
#include "projections/batch_applier.h"
#include "projections/document_set.h"
#include "projections/memory_store.h"

namespace denormd {
namespace testing {

// Absolute path of a file in the source tree, e.g. "tests/data/article/config.yaml".
std::string SourcePath(const std::string& relative);

// Whole contents of a file; fails the test (ADD_FAILURE) and returns "" if unreadable.
std::string ReadFile(const std::string& path);

// An article event log, its expected documents, and a batch size.
struct ArticleScenario {
  const char* events;    // file in tests/data/article
  const char* expected;  // file in tests/data/article
  size_t batch_size;
};
void PrintTo(const ArticleScenario& scenario, std::ostream* os);
// "OrderedBatch7", "RandomBatch5000": a test name suffix.
std::string ArticleScenarioName(const ArticleScenario& scenario);
// The ordered and the random log, each at batch sizes 1, 7 and 5000.
std::vector<ArticleScenario> AllArticleScenarios();

// Documents by collection and id, as JSON text.
using Collections = denormd::Collections;

// Compares `actual` with the "collections" object of an expected-documents
// file (tests/data/article/expected*.json) as `denormd test --expect` does
// (DiffDocumentSets: `stable` bucket collections by content and invariants,
// with the file's bucket shapes). Returns "" when they are equal, else one
// line per difference.
std::string DiffCollections(const Collections& actual, const std::string& expected_file);

// The "stale" and "dead" counts of an expected-documents file.
void ExpectedCounts(const std::string& expected_file, uint64_t* stale, uint64_t* dead);

// The PostgreSQL server of the test run, from $DENORMD_TEST_POSTGRES (set by
// scripts/test.sh). Fails the test when unset: integration tests never skip.
std::string TestPostgresUrl();

// A schema name unique to the running test ("t_<suite>_<test>", lowercase).
std::string TestSchemaName();

// Loads a config from the source tree, sets its schema to `schema` and drops
// that schema (CASCADE) in the test database so the test starts clean.
Config LoadTestConfig(const std::string& relative_path, const std::string& schema);

// `yaml` on a fresh schema of the test database (named after the running
// test; any store section is replaced).
Config ConfigOnTestDatabase(const std::string& yaml);

// A copy of the article config file with its own schema (named after the
// running test, dropped first); *config gets it parsed. For CLI tests.
std::string ArticleConfigFile(Config* config);

// The article config on a fresh schema of the test database (named after the
// running test): the engine, with its store opened. The test fails if the
// store does not open.
struct ArticleOnPostgres : Engine {
  // `adjust` may change the config before the engine is built.
  explicit ArticleOnPostgres(const std::function<void(Config*)>& adjust = nullptr);
  // The store as what it is, for what only PostgreSQL does (Execute).
  PostgresStore& postgres() { return static_cast<PostgresStore&>(store); }
};

// The article config with every buckets projection in the packed layout.
void UsePackedBuckets(Config* config);

// A record as an event log delivers it: `json` at `at`.
RawRecord LogRecord(SourcePosition at, std::string json);

// A config from YAML text (`store` with a schema, no server needed); each
// error fails the test, and the result is then an empty Config.
Config ParseTestConfig(const std::string& yaml);

// A StoreTransaction handing every call to `inner`: a test derives from it to
// watch or hold the one it overrides (the lock keys taken, a commit).
class ForwardingTransaction : public StoreTransaction {
 public:
  explicit ForwardingTransaction(std::unique_ptr<StoreTransaction> inner)
      : inner_(std::move(inner)) {}
  SourceRows& source() override { return inner_->source(); }
  ReferenceIndex& index() override { return inner_->index(); }
  DocumentTables& documents() override { return inner_->documents(); }
  BucketTables& buckets() override { return inner_->buckets(); }
  StreamLedger& ledger() override { return inner_->ledger(); }
  WriteLocks& locks() override { return inner_->locks(); }
  void SetChangeSource(const std::string& source) override { inner_->SetChangeSource(source); }
  Status Commit() override { return inner_->Commit(); }
  uint64_t round_trips() const override { return inner_->round_trips(); }
  uint64_t statements() const override { return inner_->statements(); }

 private:
  std::unique_ptr<StoreTransaction> inner_;
};

// A config from YAML text, the engine on a MemoryStore, and helpers to apply
// native events and verify. The test fails if the config does not parse.
class InMemory {
 public:
  explicit InMemory(const std::string& yaml, PlanOptions options = PlanOptions());
  // Applies `events` (native JSON) as one batch; the test fails on an error.
  BatchStats Apply(const std::vector<std::string>& events);
  // Applies `events` as one batch and returns what the applier answered (a
  // refused batch leaves the store as it was).
  Status TryApply(const std::vector<std::string>& events, BatchStats* stats);
  // What `verify` finds (empty: every document exact).
  std::vector<std::string> Differences();
  // What `rebuild` does.
  BatchStats Rebuild();
  MemoryStore& store() { return store_; }
  // The documents of `collection`, by id.
  std::map<std::string, MemoryState::Document>& Documents(const std::string& collection) {
    return store_.mutable_state()->collections[collection];
  }
  const Config& config() const { return *config_; }
  const ProjectionPlan& plan() const { return *plan_; }
  const BatchApplier& applier() const { return *applier_; }
  const Decoder& decoder() const { return *decoder_; }

 private:
  std::optional<Config> config_;
  std::unique_ptr<ProjectionPlan> plan_;
  std::unique_ptr<BatchApplier> applier_;
  std::unique_ptr<NativeDecoder> decoder_;
  MemoryStore store_;
  int64_t position_ = 0;
};

// Every collection table of `config`'s schema, read with plain SQL.
Collections ReadCollections(const Config& config);

// Runs one SQL statement against the test database; returns rows, fields
// separated by tabs.
std::vector<std::string> Sql(const std::string& statement);
// A table's storage parameters and its TOAST table's, as "a=1,b=2 | c=3"
// (pg_class.reloptions; empty where there are none).
std::string StorageOptions(const std::string& qualified_table);
// The storage parameters denormd gives the tables whose rows churn (the
// reference index, its counters, the lock table, the outbox), in that form.
extern const char* const kChurnTableOptions;

// The first field of the first row of `statement` as a number (0 when none).
uint64_t SqlCount(const std::string& statement);

// Whether a session waits for transaction `xid` (txid_current() of it) to
// end: blocked on a row it locked, inserted or deleted.
bool SomeoneWaitsFor(const std::string& xid);

// Applies `records` as one batch to `engine`'s store on a thread of its own,
// for a batch that is to wait for another transaction; *status and *stats
// are set when it ends. Join the thread before reading them.
std::thread ApplyOnThread(Engine& engine, std::vector<RawRecord> records, Status* status,
                          BatchStats* stats);

// Runs `body` on an engine of `config` whose connections carry the
// application name `<schema>_<phase>`, and returns once PostgreSQL shows
// none of them: a backend hands its statistics (pg_statio_*) over before it
// leaves pg_stat_activity, so what `body` read is counted when this returns.
void OnOwnConnections(const Config& config, const std::string& phase,
                      const std::function<void(Engine&)>& body);

// Blocks of `table` of `schema` and of its indexes read so far (from disk or
// cache), pg_statio_user_tables' count.
uint64_t TableBlocksRead(const std::string& schema, const std::string& table);

// Events of every stream of `schema` accounted for in committed batches
// (applied, stale or dead); 0 before the schema has its positions table.
uint64_t EventsProcessed(const std::string& schema);

// Runs the denormd binary with `args` and DENORMD_POSTGRES set to the test
// database; captures stdout+stderr into *output. Returns the exit code.
int RunDenormd(const std::vector<std::string>& args, std::string* output);

// What a run of the denormd binary printed, and its exit code.
struct CommandResult {
  int code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the denormd binary with `args` where nothing can be reached:
// DENORMD_POSTGRES and DENORMD_KAFKA_BROKERS name port 1 of 127.0.0.1. Its
// stdin is the file `input`, or /dev/null when "".
CommandResult RunDenormdOffline(const std::vector<std::string>& args,
                                const std::string& input = "");

// Runs the denormd binary with `args` and the environment variables `env`
// (NAME, VALUE) on top of the test's own. Its stdin is the file `input`, or
// /dev/null when "".
CommandResult RunDenormdWith(const std::vector<std::pair<std::string, std::string>>& env,
                             const std::vector<std::string>& args, const std::string& input = "");

// Writes `text` to a new file in a per-test temporary directory; returns its path.
std::string WriteTempFile(const std::string& name, const std::string& text);

// The Kafka broker of the test run, from $DENORMD_TEST_KAFKA (host:port, set
// by scripts/test.sh). Fails the test when unset.
std::string TestKafkaBootstrap();

// Runs `command` with /bin/sh; its stdout goes to *output. Returns its exit
// code (-1 when it could not run or was killed by a signal).
int RunShell(const std::string& command, std::string* output);

// Runs scripts/<script> (kafka.sh, postgres.sh, cluster.sh) with `args` and
// the environment given (pairs of NAME, VALUE added to the current one).
// Returns the exit code; stdout (and stderr with kKeep) goes to *output,
// without its trailing newlines.
enum class ScriptStderr { kDiscard, kKeep };
int RunScript(const std::string& script, const std::vector<std::string>& args,
              const std::vector<std::pair<std::string, std::string>>& env, std::string* output,
              ScriptStderr script_stderr = ScriptStderr::kDiscard);

// A Kafka broker of the test's own (scripts/kafka.sh with a state directory
// and port of its own), so that stopping it disturbs no other test. Stopped
// and removed when destroyed.
class PrivateKafka {
 public:
  PrivateKafka();
  ~PrivateKafka();
  // Runs scripts/kafka.sh with `args` against this broker; the exit code.
  int Run(const std::vector<std::string>& args);
  std::string bootstrap() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::vector<std::pair<std::string, std::string>>& env() const { return env_; }

 private:
  int port_;
  std::string state_;
  std::vector<std::pair<std::string, std::string>> env_;
};

// A copy of the article config with its own schema, Kafka topic and group,
// and extra librdkafka properties; returns the file's path.
std::string WriteKafkaArticleConfig(const std::string& schema, const std::string& brokers,
                                    const std::string& topic, const std::string& extra_kafka = "");

// A denormd process started in the background, its output in a log file.
class DaemonProcess {
 public:
  DaemonProcess(std::vector<std::string> args, std::string postgres_url);
  ~DaemonProcess();  // SIGKILLs the process if still running
  // Sets NAME=VALUE in the environment of the next Start().
  void SetEnv(const std::string& name, const std::string& value);
  void Start();
  void Kill();                       // SIGKILL and reap
  // SIGTERM; waits up to `seconds`; returns the exit code, or -1 on timeout
  // (the process is then killed).
  int Terminate(int seconds);
  bool Running();
  // The exit code once Running() has seen it exit by itself (else -1).
  int exit_code() const { return exit_code_; }
  std::string Log() const;           // everything it printed so far
  pid_t pid() const { return pid_; }

 private:
  std::vector<std::string> args_;
  std::string postgres_url_;
  std::vector<std::pair<std::string, std::string>> env_;
  std::string log_path_;
  pid_t pid_ = -1;
  int exit_code_ = -1;
  static int counter_;
};

// The raw response (status line, headers, body) of GET `path` on
// 127.0.0.1:`port`, or "" if nothing answers.
std::string HttpGet(int port, const std::string& path);

// A datagram socket standing in for systemd's notification socket
// ($NOTIFY_SOCKET): a file in the test's temporary directory, or an abstract
// name ("@..."). Keeps every message it received.
class NotifyListener {
 public:
  explicit NotifyListener(bool abstract = false);
  ~NotifyListener();
  NotifyListener(const NotifyListener&) = delete;
  NotifyListener& operator=(const NotifyListener&) = delete;
  // What to put in $NOTIFY_SOCKET.
  const std::string& path() const { return path_; }
  // The next message, or "" when none arrives within `ms`.
  std::string Receive(int ms = 5000);
  // Receives until a message satisfies `match` (true) or `seconds` pass
  // (false). Not a timing assertion: the bound only stops a hung test.
  bool ReceiveUntil(const std::function<bool(const std::string&)>& match, int seconds);
  // Receives (and keeps) whatever is queued, without waiting.
  void Drain();
  // Every message received so far, in order.
  const std::vector<std::string>& received() const { return received_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::vector<std::string> received_;
};

// Polls `condition` every 20 ms until it holds or `seconds` pass; returns
// whether it held. Not a timing assertion: the bound only stops a hung test.
bool WaitUntil(const std::function<bool()>& condition, int seconds);

// ---------------------------------------------------------------------------
// The change feed, as a consumer sees it.

// One record of the feed (or of a test's sink): key, value (absent: a
// tombstone) and headers, in the order its partition delivers them.
struct FeedRecord {
  std::string topic;
  int32_t partition = 0;
  std::string key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string Header(const std::string& name) const;
};

// A consumer's copy of the feed: per collection (the denormd-collection
// header), the last value of every key, a tombstone removing it. It also
// checks what the feed promises, by the denormd-seq header: each number
// once (a number seen again is a duplicate), and per key increasing (a key
// seen with a lower number than before got an older document after a
// newer one).
class FeedReplica {
 public:
  void Apply(const FeedRecord& record);
  // "" when the replica holds exactly `expected` (collection -> key ->
  // document JSON, compared as JSON), else one line per difference.
  std::string Diff(const std::map<std::string, std::map<std::string, std::string>>& expected) const;
  // Sequence numbers in 1..max_sequence() never seen.
  std::vector<uint64_t> Gaps() const;

  uint64_t records() const { return records_; }
  uint64_t duplicates() const { return duplicates_; }
  uint64_t reorders() const { return reorders_; }
  uint64_t max_sequence() const { return seen_.empty() ? 0 : *seen_.rbegin(); }
  uint64_t too_large() const { return too_large_; }
  const std::map<std::string, std::map<std::string, std::string>>& documents() const {
    return documents_;
  }

 private:
  std::map<std::string, std::map<std::string, std::string>> documents_;
  std::map<std::pair<std::string, std::string>, uint64_t> last_sequence_;
  std::set<uint64_t> seen_;
  uint64_t records_ = 0;
  uint64_t duplicates_ = 0;
  uint64_t reorders_ = 0;
  uint64_t too_large_ = 0;
};

// A FeedSink that keeps what is committed in memory, as a topic read with
// read_committed shows it, with faults on demand. After any failure it must
// be opened again, as the Kafka sink must.
class FakeFeedSink : public FeedSink {
 public:
  Status Open(FeedProgress* progress) override;
  Status Publish(const std::vector<FeedMessage>& messages, const FeedProgress& progress,
                 std::vector<int64_t>* too_large) override;
  void Close() override { open_ = false; }

  std::vector<FeedRecord> records;                  // committed, in order
  std::optional<FeedProgress> committed_progress;   // with the last commit
  int fail_before_commit = 0;    // so many next publishes fail, nothing committed
  int fail_after_commit = 0;     // so many next publishes commit but report a failure
  size_t refuse_larger_than = SIZE_MAX;  // values larger are refused as too large
  int opens = 0;
  int transactions = 0;

 private:
  bool open_ = false;
};

// What the feed of `config` must converge to: for every published
// collection, its documents by feed key (daemon/feed_relay.h FeedKey), read
// from the tables of the test database, or from a MemoryStore.
std::map<std::string, std::map<std::string, std::string>> FeedExpectation(const Config& config);
std::map<std::string, std::map<std::string, std::string>> FeedExpectation(
    const Config& config, const MemoryState& state);

// Every record of `topic` at `brokers`, read with isolation.level=
// read_committed from the beginning of every partition to its end (all
// partitions at their high watermark, nothing pending). Fails the test
// (and returns what it read) when that takes longer than `seconds`.
std::vector<FeedRecord> ConsumeFeedTopic(const std::string& brokers, const std::string& topic,
                                         int seconds = 120);

// The feed topic `feed_topic` of `config` read to its end (ConsumeFeedTopic)
// and checked as a consumer sees it: records there, no sequence number twice,
// none missing, no key back to an older document, the replica equal to the
// tables of `config` (FeedExpectation) and the relay's recorded sequence
// (feed_state) the last one on the topic. Returns the replica.
FeedReplica ExpectFeedEqualsTables(const std::string& brokers, const std::string& feed_topic,
                                   const Config& config);

}  // namespace testing
}  // namespace denormd

#endif  // DENORMD_TESTS_TEST_SUPPORT_H_
