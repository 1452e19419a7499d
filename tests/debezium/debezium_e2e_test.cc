// End to end with a real Debezium: an application PostgreSQL (wal_level=logical,
// tests/data/debezium/app_schema.sql), Kafka Connect with the Debezium
// PostgreSQL connector (scripts/connect.sh), the suite's Kafka broker and
// `denormd run` consuming the connector's topics in the Debezium format. SQL
// changes the application's rows; Connect and the daemon are killed with
// SIGKILL mid-run and restarted; a TRUNCATE is resynced as its dead letter
// says; the documents must then be exactly what the config computes from the
// application's final rows, and verify clean.
//
// Label `debezium` (its folder): `ctest -LE debezium` leaves it out. Needs
// scripts/test.sh's services (DENORMD_TEST_POSTGRES, DENORMD_TEST_KAFKA) and
// starts its own application PostgreSQL and Connect worker under
// $DENORMD_STATE_DIR/debezium-e2e (ports DENORMD_TEST_APP_PG_PORT, default
// 55436, and DENORMD_TEST_CONNECT_PORT, default 18084). Java and Maven come
// with scripts/install-deps.sh; the jars are fetched once into .local/connect.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "projections/document_set.h"
#include "projections/json.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::SourcePath;

constexpr int kPatience = 240;  // seconds before a wait counts as hung

std::string Env(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class DebeziumEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string bootstrap = testing::TestKafkaBootstrap();
    state_dir_ = Env("DENORMD_STATE_DIR", SourcePath(".local/test")) + "/debezium-e2e";
    prefix_ = "dbz" + std::to_string(getpid());
    schema_ = testing::TestSchemaName();
    env_ = {{"DENORMD_STATE_DIR", state_dir_},
            {"DENORMD_PG_PORT", Env("DENORMD_TEST_APP_PG_PORT", "55436")},
            {"DENORMD_PG_DB", "app"},
            {"DENORMD_PG_WAL_LEVEL", "logical"},
            {"DENORMD_CONNECT_PORT", Env("DENORMD_TEST_CONNECT_PORT", "18084")},
            {"DENORMD_CONNECT_DB_PORT", Env("DENORMD_TEST_APP_PG_PORT", "55436")},
            {"DENORMD_CONNECT_DB_NAME", "app"},
            {"DENORMD_CONNECT_BOOTSTRAP", bootstrap},
            {"DENORMD_CONNECT_TOPIC_PREFIX", prefix_},
            {"DENORMD_CONNECT_NAME", prefix_}};
    ASSERT_EQ(0, Script("postgres.sh", "start")) << ScriptLog();
    Script("connect.sh", "stop");
    ASSERT_EQ(0, Script("connect.sh", "reset")) << ScriptLog();  // no slot, no offsets
    ASSERT_EQ(0, AppSql("-f " + ShellQuote(SourcePath("tests/data/debezium/app_schema.sql"))));
    ASSERT_EQ(0, AppSql("-f " + ShellQuote(SourcePath("tests/data/debezium/app_seed.sql"))));

    // The application config, on this run's topics, group and schema.
    std::string text = testing::ReadFile(SourcePath("tests/data/debezium/config.yaml"));
    Replace(&text, "brokers: 127.0.0.1:19092", "brokers: " + bootstrap);
    // A killed member leaves the group after 6 s, not librdkafka's default 45 s.
    Replace(&text, "group: denormd-app",
            "group: " + prefix_ +
                "\n    properties: {session.timeout.ms: 6000, heartbeat.interval.ms: 500}");
    Replace(&text, "schema: app_docs", "schema: " + schema_);
    for (size_t at; (at = text.find("topic: app.public.")) != std::string::npos;) {
      text.replace(at, 10, "topic: " + prefix_);
    }
    config_yaml_ = text;
    config_file_ = testing::WriteTempFile(schema_ + ".yaml", text);
    testing::Sql("drop schema if exists " + schema_ + " cascade");
  }

  void TearDown() override {
    Script("connect.sh", "stop");
    Script("connect.sh", "reset");  // drop the slot: an inactive one keeps WAL
    Script("postgres.sh", "stop");
  }

  static void Replace(std::string* text, const std::string& from, const std::string& to) {
    const size_t at = text->find(from);
    ASSERT_NE(std::string::npos, at) << from;
    text->replace(at, from.size(), to);
  }

  // Runs scripts/NAME ARGS with this test's environment; output to a log.
  int Script(const std::string& name, const std::string& args) {
    std::string command;
    for (const auto& [key, value] : env_) command += key + "=" + ShellQuote(value) + " ";
    command += "bash " + ShellQuote(SourcePath("scripts/" + name)) + " " + args + " >>" +
               ShellQuote(LogPath()) + " 2>&1";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  const std::string& LogPath() {
    if (log_path_.empty()) log_path_ = testing::WriteTempFile("scripts.log", "");
    return log_path_;
  }
  std::string ScriptLog() { return testing::ReadFile(LogPath()); }
  int AppSql(const std::string& args) { return Script("postgres.sh", "psql -q -v ON_ERROR_STOP=1 " + args); }
  int AppSqlText(const std::string& sql) {
    return AppSql("-f " + ShellQuote(testing::WriteTempFile("step.sql", sql)));
  }

  // The application's rows now, as native upserts with Debezium's encodings
  // (numeric as text, date as days, timestamp as microseconds, timestamptz as
  // UTC with 6 fractional digits, jsonb as JSON): what the documents must be
  // computed from.
  std::vector<std::string> FinalRowsAsEvents() {
    const std::string out = testing::WriteTempFile("rows.jsonl", "");
    const char* query = R"SQL(
select json_build_object('type', 'author', 'id', id, 'op', 'upsert', 'data',
  json_build_object('id', id, 'first_name', first_name, 'last_name', last_name, 'images', images))
  from authors
union all
select json_build_object('type', 'book', 'id', id, 'op', 'upsert', 'data',
  json_build_object('id', id, 'name', name, 'pub_id', pub_id, 'price', price::text,
                    'published_on', published_on - date '1970-01-01'))
  from books
union all
select json_build_object('type', 'book_author', 'id', book_id || ':' || author_id, 'op', 'upsert',
  'data', json_build_object('book_id', book_id, 'author_id', author_id, 'position', position))
  from book_authors
union all
select json_build_object('type', 'post', 'id', id, 'op', 'upsert', 'data',
  json_build_object('id', id, 'title', title, 'summary', summary, 'edited_at',
                    (extract(epoch from edited_at) * 1000000)::bigint))
  from posts
union all
select json_build_object('type', 'comment', 'id', id, 'op', 'upsert', 'data',
  json_build_object('id', id, 'post_id', post_id, 'author', author, 'comment', comment,
    'created_at', to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')))
  from comments
)SQL";
    EXPECT_EQ(0, AppSql("-At -o " + ShellQuote(out) + " -f " +
                        ShellQuote(testing::WriteTempFile("rows.sql", query))));
    std::vector<std::string> events;
    std::string text = testing::ReadFile(out);
    for (size_t start = 0; start < text.size();) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      if (end > start) events.push_back(text.substr(start, end - start));
      start = end + 1;
    }
    return events;
  }

  // The differences between the documents in PostgreSQL and those the config
  // computes from `events` in memory ("" when equal).
  std::string Differences(const std::vector<std::string>& events) {
    testing::InMemory memory(config_yaml_);
    memory.Apply(events);
    Config config = memory.config();
    DocumentSet expected = EmptyDocumentSet(config);
    for (const auto& [collection, docs] : memory.store().state().collections) {
      for (const auto& [key, doc] : docs) expected.collections[collection][doc.id] = doc.json;
    }
    DocumentSet have = EmptyDocumentSet(config);
    have.collections = testing::ReadCollections(config);
    std::string out;
    for (const std::string& line : DiffDocumentSets(have, expected)) out += line + "\n";
    return out;
  }

  uint64_t Applied() {
    std::vector<std::string> rows =
        testing::Sql("select to_regclass('" + schema_ + ".positions') is null");
    if (rows.empty() || rows[0] == "t") return 0;
    rows = testing::Sql("select coalesce(sum(applied + stale), 0) from " + schema_ + ".positions");
    return rows.empty() ? 0 : std::strtoull(rows[0].c_str(), nullptr, 10);
  }

  std::string state_dir_, prefix_, schema_, config_yaml_, config_file_, log_path_;
  std::vector<std::pair<std::string, std::string>> env_;
};

// app_changes.sql without its last step (its TRUNCATE: the test runs its own,
// later).
std::string ChangesWithoutTruncate() {
  std::string sql = testing::ReadFile(SourcePath("tests/data/debezium/app_changes.sql"));
  return sql.substr(0, sql.find("-- 12."));
}

// Many small transactions: comments inserted, edited, deleted, and the
// author renamed back and forth, so that a kill lands among them.
std::string Load(int from, int to) {
  std::string sql;
  for (int i = from; i < to; ++i) {
    const std::string id = "m" + std::to_string(i);
    sql += "insert into comments values ('" + id + "', 'p1', 'user" + std::to_string(i % 7) +
           "', 'comment " + id + "', timestamptz '2024-03-01 00:00:00+00' + interval '" +
           std::to_string(i) + " seconds');\n";
    if (i % 3 == 0) sql += "update comments set comment = comment || ' (edited)' where id = '" + id + "';\n";
    if (i % 5 == 0) sql += "delete from comments where id = 'm" + std::to_string(i - 2) + "';\n";
    if (i % 10 == 0) {
      sql += "update authors set last_name = 'Stinger-" + std::to_string(i) + "' where id = 'a3';\n";
    }
  }
  return sql;
}

TEST_F(DebeziumEndToEnd, DocumentsEqualTheApplicationsRowsThroughKillsOfConnectAndTheDaemon) {
  const auto started = std::chrono::steady_clock::now();
  ASSERT_EQ(0, Script("connect.sh", "start")) << ScriptLog();
  ASSERT_EQ(0, Script("connect.sh", "wait-streaming")) << ScriptLog();

  testing::DaemonProcess daemon({"run", "-c", config_file_}, testing::TestPostgresUrl());
  daemon.Start();
  // The snapshot: 2 authors, 2 books, 3 links, 1 post, 2 comments.
  ASSERT_TRUE(testing::WaitUntil([&] { return Applied() >= 10; }, kPatience)) << daemon.Log();

  ASSERT_EQ(0, AppSqlText(ChangesWithoutTruncate())) << ScriptLog();
  ASSERT_EQ(0, AppSqlText(Load(0, 150)));
  // Mid-stream: wait for the daemon to apply some of the load, then kill -9
  // Connect and the daemon; more changes while both are down.
  const uint64_t before_kill = Applied();
  ASSERT_TRUE(testing::WaitUntil([&] { return Applied() > before_kill + 20; }, kPatience))
      << daemon.Log();
  ASSERT_EQ(0, Script("connect.sh", "kill"));
  daemon.Kill();
  ASSERT_EQ(0, AppSqlText(Load(150, 300)));

  ASSERT_EQ(0, Script("connect.sh", "start")) << ScriptLog();
  daemon.Start();
  ASSERT_EQ(0, AppSqlText(Load(300, 400)));

  // TRUNCATE, then rows inserted and changed after it: the truncate is a
  // dead letter; its documented resync (a native delete at its lsn for every
  // stored comment, replayed) removes exactly the rows it removed.
  ASSERT_EQ(0, AppSqlText("truncate comments;\n" + Load(400, 420)));
  const std::string dead_letters = "select reason from " + schema_ + ".dead_letters";
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return Applied() > 0 && testing::Sql(dead_letters).size() == 1; }, kPatience))
      << daemon.Log();
  const std::string reason = testing::Sql(dead_letters)[0];
  const size_t at = reason.find(" at lsn ");
  ASSERT_NE(std::string::npos, at) << reason;
  const std::string lsn = reason.substr(at + 8, reason.find(':', at) - at - 8);
  std::string resync;
  for (const std::string& line : testing::Sql(
           "select json_build_object('type', type, 'id', id, 'op', 'delete', 'version', " + lsn +
           ") from " + schema_ + ".entities where type = 'comment' and not deleted")) {
    resync += line + "\n";
  }
  std::string output;
  ASSERT_EQ(0, testing::RunDenormd({"replay", "-c", config_file_,
                                    testing::WriteTempFile("resync-" + lsn + ".jsonl", resync)},
                                   &output))
      << output;
  ASSERT_EQ(0, Script("connect.sh", "wait-caught-up")) << ScriptLog();

  // Everything committed in the application is in Kafka: the documents must
  // reach exactly what the final rows give (the bound only stops a hung run).
  const std::vector<std::string> rows = FinalRowsAsEvents();
  ASSERT_GT(rows.size(), 20u);  // 8 rows of the seed and changes, the comments since the truncate
  std::string differences;
  const bool reached = testing::WaitUntil(
      [&] {
        differences = Differences(rows);
        return differences.empty();
      },
      kPatience);
  EXPECT_TRUE(reached) << differences.substr(0, 4000) << "\n" << daemon.Log().substr(0, 4000);
  EXPECT_EQ(0, daemon.Terminate(30)) << daemon.Log();

  EXPECT_EQ(0, testing::RunDenormd({"verify", "-c", config_file_}, &output)) << output;
  EXPECT_EQ(std::vector<std::string>{"1"},  // the truncate, no other
            testing::Sql("select count(*) from " + schema_ + ".dead_letters"));
  // Connect's redeliveries after its kill arrive as stale events, if any.
  std::cout << "debezium e2e: " << rows.size() << " rows, "
            << testing::Sql("select sum(applied) || ' applied, ' || sum(stale) || ' stale' from " +
                            schema_ + ".positions")[0]
            << ", "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()
            << " s\n";
}

}  // namespace
}  // namespace denormd
