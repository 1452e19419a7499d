// denormd owns what it creates and touches nothing else (issue 25): every
// table and index it creates carries its mark of ownership; a schema holding
// relations of denormd's names without the mark is refused, and nothing in it
// is created, changed or dropped; a store of a release before the mark is
// refused until `denormd adopt` marks it.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "connectors/postgres_store.h"
#include "projections/derivations/registry.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::Sql;

constexpr const char* kModel =
    "store: {schema: x}\nentities: [a]\nprojections: {docs: {from: a, include: [name]}}\n";

// Relations of `schema` (tables and indexes) without denormd's mark.
std::vector<std::string> Unmarked(const std::string& schema) {
  return Sql("select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace"
             " where n.nspname = '" + schema + "' and c.relkind in ('r', 'i')"
             " and obj_description(c.oid, 'pg_class') is distinct from 'denormd' order by 1");
}

TEST(Ownership, EveryTableAndIndexDenormdCreatesCarriesItsMark) {
  Config config = testing::ConfigOnTestDatabase(std::string(kModel) +
                                                "feed: {topic: t, brokers: unused:1}\n");
  PostgresStore store(config, config.store.postgres);
  ASSERT_TRUE(store.Open().ok());
  // Every relation but the primary keys' own indexes (named *_pkey by
  // PostgreSQL, and dropped with their table).
  std::vector<std::string> unmarked = Unmarked(config.store.schema);
  unmarked.erase(std::remove_if(unmarked.begin(), unmarked.end(),
                                [](const std::string& name) {
                                  return name.size() > 5 &&
                                         name.compare(name.size() - 5, 5, "_pkey") == 0;
                                }),
                 unmarked.end());
  EXPECT_EQ(std::vector<std::string>{}, unmarked);
  EXPECT_GE(testing::SqlCount("select count(*) from pg_class c join pg_namespace n on"
                              " n.oid = c.relnamespace where n.nspname = '" +
                              config.store.schema +
                              "' and obj_description(c.oid, 'pg_class') = 'denormd'"),
            16u);
}

TEST(Ownership, ASchemaHoldingAnotherApplicationsTableOfDenormdsNameIsRefused) {
  Config config = testing::ConfigOnTestDatabase(kModel);
  const std::string& s = config.store.schema;
  Sql("create schema " + s);
  Sql("create table " + s + ".refs (owner text, amount int)");
  Sql("insert into " + s + ".refs values ('application', 42)");
  PostgresStore store(config, config.store.postgres);
  Status status = store.Open();
  ASSERT_TRUE(status.IsInvalidInput()) << status.ToString();
  EXPECT_NE(std::string::npos, status.message().find("did not create (refs)")) << status.message();
  // Nothing created beside it, nothing changed in it.
  EXPECT_EQ(std::vector<std::string>{"refs"},
            Sql("select tablename from pg_tables where schemaname = '" + s + "'"));
  EXPECT_EQ(std::vector<std::string>{"application\t42"}, Sql("select * from " + s + ".refs"));
  EXPECT_EQ(std::vector<std::string>{""},
            Sql("select coalesce(obj_description('" + s + ".refs'::regclass, 'pg_class'), '')"));
  // And adopt does not take it either: no meta of denormd's.
  Status adopted = store.Adopt(nullptr);
  EXPECT_TRUE(adopted.IsInvalidInput()) << adopted.ToString();
  EXPECT_NE(std::string::npos, adopted.message().find("no meta table")) << adopted.message();
}

TEST(Ownership, ACollectionOfAnotherApplicationIsRefused) {
  Config config = testing::ConfigOnTestDatabase(kModel);
  const std::string& s = config.store.schema;
  Sql("create schema " + s);
  Sql("create table " + s + ".docs (id text primary key, doc jsonb not null, pk text,"
      " projection text not null)");
  PostgresStore store(config, config.store.postgres);
  Status status = store.Open();
  ASSERT_TRUE(status.IsInvalidInput()) << status.ToString();
  EXPECT_NE(std::string::npos, status.message().find("(docs)")) << status.message();
}

// A store made before the mark: the same tables, no comments.
TEST(Ownership, AStoreOfAnOlderReleaseIsRefusedUntilAdopted) {
  Config config = testing::ConfigOnTestDatabase(kModel);
  const std::string& s = config.store.schema;
  {
    PostgresStore store(config, config.store.postgres);
    ASSERT_TRUE(store.Open().ok());
  }
  Sql("insert into " + s + ".docs (id, doc, projection) values ('a1', '{\"name\": \"x\"}', 'docs')");
  // What a release before the mark made: no comment anywhere.
  for (const std::string& line :
       Sql("select case c.relkind when 'i' then 'index' else 'table' end, c.relname from pg_class c"
           " join pg_namespace n on n.oid = c.relnamespace where n.nspname = '" + s +
           "' and c.relkind in ('r', 'i')")) {
    const std::string kind = line.substr(0, line.find('\t'));
    Sql("comment on " + kind + " " + s + "." + line.substr(line.find('\t') + 1) + " is null");
  }

  PostgresStore refused(config, config.store.postgres);
  Status status = refused.Open();
  ASSERT_TRUE(status.IsInvalidInput()) << status.ToString();
  EXPECT_NE(std::string::npos, status.message().find("older than the mark")) << status.message();
  EXPECT_NE(std::string::npos, status.message().find("denormd adopt -c")) << status.message();

  // Through the command line, as an operator would.
  const std::string file = testing::WriteTempFile(
      "older.yaml", std::string(kModel).replace(std::string(kModel).find("x}"), 1, s));
  testing::CommandResult adopt =
      testing::RunDenormdWith({{"DENORMD_POSTGRES", testing::TestPostgresUrl()}},
                              {"adopt", "-c", file});
  ASSERT_EQ(0, adopt.code) << adopt.out << adopt.err;
  EXPECT_NE(std::string::npos, adopt.out.find("marked as denormd's: ")) << adopt.out;
  EXPECT_NE(std::string::npos, adopt.out.find("meta")) << adopt.out;

  PostgresStore adopted(config, config.store.postgres);
  ASSERT_TRUE(adopted.Open().ok());
  EXPECT_EQ(std::vector<std::string>{"{\"name\": \"x\"}"},
            Sql("select doc from " + s + ".docs where id = 'a1'"));
  // Adopting again marks nothing more.
  std::vector<std::string> again;
  ASSERT_TRUE(adopted.Adopt(&again).ok());
  EXPECT_EQ(std::vector<std::string>{}, again);
}

TEST(Ownership, AdoptRefusesAMetaTableThatIsNotDenormds) {
  Config config = testing::ConfigOnTestDatabase(kModel);
  const std::string& s = config.store.schema;
  Sql("create schema " + s);
  Sql("create table " + s + ".meta (key text primary key, value text not null, extra int)");
  Sql("insert into " + s + ".meta values ('epoch', '1', 0)");
  PostgresStore store(config, config.store.postgres);
  Status opened = store.Open();
  ASSERT_TRUE(opened.IsInvalidInput()) << opened.ToString();
  EXPECT_NE(std::string::npos, opened.message().find("did not create (meta)")) << opened.message();
  Status adopted = store.Adopt(nullptr);
  ASSERT_TRUE(adopted.IsInvalidInput()) << adopted.ToString();
  EXPECT_NE(std::string::npos, adopted.message().find("is not denormd's")) << adopted.message();
  EXPECT_EQ(std::vector<std::string>{""},
            Sql("select coalesce(obj_description('" + s + ".meta'::regclass, 'pg_class'), '')"));
}

}  // namespace
}  // namespace denormd
