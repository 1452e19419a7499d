// End to end with a real Debezium: an application PostgreSQL (wal_level=logical,
// tests/data/debezium/app_schema.sql), Kafka Connect with the Debezium
// PostgreSQL connector (scripts/connect.sh), the suite's Kafka broker and
// `denormd run` consuming the connector's topics in the Debezium format. SQL
// changes the application's rows; Connect and the daemon are killed with
// SIGKILL mid-run and restarted; a TRUNCATE is resynced as its dead letter
// says; the documents must then be exactly what the config computes from the
// application's final rows, and verify clean.
//
// The many-to-many goes through the join table (config.yaml: a book's
// `authors` is a lookup through book_author, an author's `countOfBooks` and
// `bookIds` count and list books through it): rows deleted from and inserted
// into book_authors, a link repointed (a primary-key update), and authors
// renamed, before and across the kills. Those fields are also compared with
// what SQL joins of the application's tables give (ThroughDifferences), an
// oracle independent of denormd's engine.
//
// Label `debezium` (its folder): `ctest -LE debezium` leaves it out. Needs
// scripts/test.sh's services (DENORMD_TEST_POSTGRES, DENORMD_TEST_KAFKA) and
// starts its own application PostgreSQL and Connect worker under
// $DENORMD_STATE_DIR/debezium-e2e (ports DENORMD_TEST_APP_PG_PORT, default
// 15436, and DENORMD_TEST_CONNECT_PORT, default 18084). Java and Maven come
// with scripts/install-deps.sh; the jars are fetched once into .local/connect.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>
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
            {"DENORMD_PG_PORT", Env("DENORMD_TEST_APP_PG_PORT", "15436")},
            {"DENORMD_PG_DB", "app"},
            {"DENORMD_PG_WAL_LEVEL", "logical"},
            {"DENORMD_CONNECT_PORT", Env("DENORMD_TEST_CONNECT_PORT", "18084")},
            {"DENORMD_CONNECT_DB_PORT", Env("DENORMD_TEST_APP_PG_PORT", "15436")},
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
  (to_jsonb(b) - 'price' - 'published_on'
     -- a column added later reaches a row's entity when the row next changes
     -- (only b1 changes after the subtitle column is added)
     - case when id <> 'b1' then 'subtitle' else '' end)
  || jsonb_build_object('price', price::text, 'published_on', published_on - date '1970-01-01'))
  from books b
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

  // The fields that go through book_authors, computed by SQL joins in the
  // application database, against the documents in PostgreSQL ("" when
  // equal): an author's countOfBooks and bookIds (ascending), a book's
  // authors ({id, name}, by the join rows' position, then id).
  std::string ThroughDifferences() {
    const std::string out = testing::WriteTempFile("through.tsv", "");
    const char* query = R"SQL(
select 'authors', a.id, json_build_object(
    'countOfBooks', count(ba.book_id),
    'bookIds', coalesce(json_agg(ba.book_id order by ba.book_id collate "C")
                          filter (where ba.book_id is not null), '[]'))
  from authors a left join book_authors ba on ba.author_id = a.id group by a.id
union all
select 'books', b.id, json_build_object(
    'authors', coalesce(json_agg(json_build_object('id', a.id, 'name', a.first_name || ' ' || a.last_name)
                                 order by ba.position, a.id collate "C")
                        filter (where a.id is not null), '[]'))
  from books b left join book_authors ba on ba.book_id = b.id
       left join authors a on a.id = ba.author_id
  group by b.id
)SQL";
    EXPECT_EQ(0, AppSql("-At -F '\t' -o " + ShellQuote(out) + " -f " +
                        ShellQuote(testing::WriteTempFile("through.sql", query))));
    testing::InMemory parsed(config_yaml_);
    const Collections have = testing::ReadCollections(parsed.config());
    std::string differences;
    std::istringstream lines(testing::ReadFile(out));
    int compared = 0;
    for (std::string line; std::getline(lines, line); ++compared) {
      const size_t tab1 = line.find('\t'), tab2 = line.find('\t', tab1 + 1);
      const std::string collection = line.substr(0, tab1);
      const std::string id = line.substr(tab1 + 1, tab2 - tab1 - 1);
      JsonDocument want, doc;
      EXPECT_TRUE(ParseJson(line.substr(tab2 + 1), &want).ok()) << line;
      auto c = have.find(collection);
      if (c == have.end() || c->second.find(id) == c->second.end()) {
        differences += collection + "/" + id + ": no document\n";
        continue;
      }
      EXPECT_TRUE(ParseJson(c->second.at(id), &doc).ok());
      for (auto field = want.MemberBegin(); field != want.MemberEnd(); ++field) {
        const std::string name = field->name.GetString();
        const std::string got =
            doc.HasMember(name.c_str()) ? CanonicalJson(doc[name.c_str()]) : "(absent)";
        if (got != CanonicalJson(field->value)) {
          differences += collection + "/" + id + "." + name + ": " + got + ", the rows give " +
                         CanonicalJson(field->value) + "\n";
        }
      }
    }
    if (compared == 0) differences += "the SQL gave no rows\n";
    return differences;
  }

  // "<id> <countOfBooks> <bookIds>" of every author document, by id.
  std::vector<std::string> AuthorsBooks() {
    return testing::Sql("select id || ' ' || (doc->'countOfBooks')::text || ' ' || "
                        "(doc->'bookIds')::text from " + schema_ + ".authors order by id");
  }
  // The names in book `id`'s authors, in order.
  std::string AuthorNames(const std::string& id) {
    const std::vector<std::string> rows = testing::Sql(
        "select string_agg(a->>'name', ', ' order by n) from " + schema_ +
        ".books, jsonb_array_elements(doc->'authors') with ordinality as t(a, n) where id = '" + id + "'");
    return rows.empty() ? "" : rows[0];
  }

  // Waits until the documents equal what the config computes from the
  // application's rows now, and the join-table fields what SQL gives.
  void ExpectDocumentsFollowTheRows(const std::string& when, testing::DaemonProcess* daemon) {
    const std::vector<std::string> rows = FinalRowsAsEvents();
    std::string differences;
    const bool reached = testing::WaitUntil(
        [&] {
          differences = Differences(rows);
          if (differences.empty()) differences = ThroughDifferences();
          return differences.empty();
        },
        kPatience);
    EXPECT_TRUE(reached) << when << ":\n"
                         << differences.substr(0, 4000) << "\n"
                         << daemon->Log().substr(0, 4000);
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

// Steps [from, to) of app_changes.sql ("-- N." starts step N); its last
// step, the TRUNCATE, is left to the test, which runs its own later.
std::string ChangeSteps(int from, int to) {
  std::string sql = testing::ReadFile(SourcePath("tests/data/debezium/app_changes.sql"));
  const size_t begin = from == 1 ? 0 : sql.find("\n-- " + std::to_string(from) + ".");
  const size_t end = sql.find("\n-- " + std::to_string(to) + ".");
  EXPECT_NE(std::string::npos, begin);
  EXPECT_NE(std::string::npos, end);
  return sql.substr(begin, end - begin);
}

// Many small transactions, so that a kill lands among them: comments
// inserted, edited, deleted; authors renamed (a1 and a3, whose books carry
// their names through book_authors); the link b3-a1 deleted and inserted
// again (b3's authors, a1's countOfBooks and bookIds); b1's link to a3
// repointed to a new author a4 and back (a primary-key update of
// book_authors: a delete and a create). At the end (i = 419) b3 has a1 and
// b1 has a4.
std::string Load(int from, int to) {
  std::string sql;
  for (int i = from; i < to; ++i) {
    const std::string id = "m" + std::to_string(i);
    const std::string n = std::to_string(i);
    if (i == 0) {
      sql += "insert into authors (id, first_name, last_name) values ('a4', 'Ann', 'Other');\n";
    }
    if (i % 6 == 1) sql += "delete from book_authors where book_id = 'b3' and author_id = 'a1';\n";
    if (i % 6 == 4) sql += "insert into book_authors values ('b3', 'a1', 2);\n";
    if (i % 20 == 7) {
      sql += "update book_authors set author_id = case author_id when 'a3' then 'a4' else 'a3' end "
             "where book_id = 'b1' and author_id in ('a3', 'a4');\n";
    }
    if (i % 10 == 5) sql += "update authors set first_name = 'Thomas-" + n + "' where id = 'a1';\n";
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

  ExpectDocumentsFollowTheRows("the snapshot", &daemon);
  if (HasFailure()) return;

  // app_changes.sql steps 1-5: a book and its link in one transaction; book b1
  // loses author a2 and gains a3 (a delete and an insert in book_authors);
  // author a1 renamed, which reaches books b1 and b2 through their links. Here
  // a2 is still alive: its countOfBooks goes to 0 and its bookIds to [].
  ASSERT_EQ(0, AppSqlText(ChangeSteps(1, 6))) << ScriptLog();
  ExpectDocumentsFollowTheRows("app_changes.sql steps 1-5", &daemon);
  if (HasFailure()) return;
  EXPECT_EQ((std::vector<std::string>{R"(a1 2 ["b1", "b2"])", "a2 0 []", R"(a3 2 ["b1", "b3"])"}),
            AuthorsBooks());
  EXPECT_EQ("Thomas Andersen-Smith, Dirk Stinger", AuthorNames("b1"));
  EXPECT_EQ("Thomas Andersen-Smith", AuthorNames("b2"));
  // Unchanged TOASTed values: a3's images (jsonb, json_columns) and p1's
  // summary (text) get ~10 kB that does not compress (stored out of line),
  // then another column of each row changes. The connector sends its
  // placeholder for the unchanged value; the documents keep the stored one
  // (no dead letter: the final count below is the truncate's alone).
  ASSERT_EQ(0, AppSqlText(
                   "update authors set images = (select jsonb_agg(jsonb_build_object('thumbnail',"
                   " 'https://img/' || md5(g::text) || md5(g::text || 'x'))) from"
                   " generate_series(1, 160) g) where id = 'a3';\n"
                   "update posts set summary = (select string_agg(md5(g::text || 's'), '') from"
                   " generate_series(1, 320) g) where id = 'p1';\n"
                   "update authors set last_name = 'Stinger-T' where id = 'a3';\n"
                   "update posts set title = title || ' (edited)' where id = 'p1';\n"))
      << ScriptLog();
  ExpectDocumentsFollowTheRows("unchanged TOASTed values", &daemon);
  if (HasFailure()) return;
  EXPECT_EQ(0u, testing::SqlCount("select count(*) from " + schema_ + ".dead_letters"));
  // A join row moved in the book's author order (link_order_by: position).
  ASSERT_EQ(0, AppSqlText("update book_authors set position = 0 where book_id = 'b1' and "
                          "author_id = 'a3';\n"))
      << ScriptLog();
  ExpectDocumentsFollowTheRows("a join row's position changed", &daemon);
  if (HasFailure()) return;
  EXPECT_EQ("Dirk Stinger-T, Thomas Andersen-Smith", AuthorNames("b1"));
  // A column added while the connector runs, then given a value: the next
  // change records carry it, and the documents copy it.
  ASSERT_EQ(0, AppSqlText("alter table books add column subtitle text;\n"
                          "update books set subtitle = 'Second edition' where id = 'b1';\n"))
      << ScriptLog();
  ExpectDocumentsFollowTheRows("a column added", &daemon);
  if (HasFailure()) return;
  EXPECT_EQ(std::vector<std::string>{"Second edition"},
            testing::Sql("select doc->>'subtitle' from " + schema_ + ".books where id = 'b1'"));
  // Every row of the join table deleted (one transaction), then inserted
  // again (another): the documents lose their links, then have them back.
  ASSERT_EQ(0, AppSqlText("create temp table saved as select * from book_authors;\n"
                          "delete from book_authors;\n"
                          "insert into book_authors select * from saved;\n"))
      << ScriptLog();
  ExpectDocumentsFollowTheRows("the join table emptied and filled again", &daemon);
  if (HasFailure()) return;
  EXPECT_EQ((std::vector<std::string>{R"(a1 2 ["b1", "b2"])", "a2 0 []", R"(a3 2 ["b1", "b3"])"}),
            AuthorsBooks());
  // Steps 6-11: comments, a book deleted with its links, an author deleted.
  ASSERT_EQ(0, AppSqlText(ChangeSteps(6, 12))) << ScriptLog();
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
  ASSERT_GT(rows.size(), 20u);  // 10 rows of the seed and changes, the comments since the truncate
  ExpectDocumentsFollowTheRows("the final rows", &daemon);
  // The load's last link changes: b3 has a1 again, b1's link went to a4; the
  // last renames reached both books.
  EXPECT_EQ((std::vector<std::string>{R"(a1 2 ["b1", "b3"])", R"(a3 1 ["b3"])", R"(a4 1 ["b1"])"}),
            AuthorsBooks());
  // b1's second link row (position 0 since the move above) went to a4.
  EXPECT_EQ("Ann Other, Thomas-415 Andersen-Smith", AuthorNames("b1"));
  // b3's authors in the join rows' order: a3 at position 1, a1 at 2.
  EXPECT_EQ("Dirk Stinger-410, Thomas-415 Andersen-Smith", AuthorNames("b3"));
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
