// A collection named like one of denormd's own tables would clash with it in
// PostgreSQL (while `denormd test`, in memory, would not notice): `check`
// must refuse every name the PostgreSQL store uses, read from a real schema.
#include <algorithm>

#include <gtest/gtest.h>

#include "formats/format_registry.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

TEST(ReservedTables, EveryTableOfTheStoreIsRefusedAsACollectionName) {
  // With a change feed, so that its tables are there too.
  Config config = testing::ConfigOnTestDatabase(
      "store: {schema: x}\nentities: [a]\nprojections: {docs: {from: a}}\n"
      "feed: {topic: t, brokers: unused:1}\n");
  Engine engine(config, config.store.postgres);
  ASSERT_TRUE(engine.store.Open().ok());
  const std::vector<std::string> tables =
      testing::Sql("select table_name from information_schema.tables where table_schema = '" +
                   config.store.schema + "' and table_name <> 'docs' order by 1");
  EXPECT_GE(tables.size(), 10u);
  EXPECT_NE(std::find(tables.begin(), tables.end(), "outbox"), tables.end());
  EXPECT_NE(std::find(tables.begin(), tables.end(), "feed_state"), tables.end());
  for (const std::string& table : tables) {
    std::vector<ConfigError> errors;
    std::optional<Config> clash = ParseConfig(
        "store: {schema: x}\nentities: [a]\nprojections: {p: {from: a, collection: " + table +
            "}}\n",
        "clash.yaml", &errors);
    EXPECT_FALSE(clash.has_value()) << "a collection named " << table << " is accepted";
    ASSERT_EQ(1u, errors.size()) << table;
    EXPECT_NE(std::string::npos, errors[0].message.find("clashes with a table denormd keeps"))
        << errors[0].message;
  }
}

}  // namespace
}  // namespace denormd
