// Every PostgreSQL connection denormd makes gets the same session settings
// (issue 25): the relay's connection has the store's lock and statement
// timeouts (a lock it cannot get fails its statement instead of blocking the
// relay's thread), and standard_conforming_strings is pinned on whatever the
// server or the connection string says (denormd's hand-built literals double
// quotes only).
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "connectors/postgres_outbox.h"
#include "connectors/postgres_store.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

// The test server's URL with `options` (URL-encoded libpq options) added.
std::string WithOptions(const std::string& options) {
  const std::string url = testing::TestPostgresUrl();
  return url + (url.find('?') == std::string::npos ? "?" : "&") + "options=" + options;
}

TEST(SessionSettings, StandardConformingStringsIsPinnedOn) {
  Config config = testing::ConfigOnTestDatabase(
      "store: {schema: x}\nentities: [a]\nprojections: {docs: {from: a}}\n");
  // The connection asks for the old escaping; denormd's session overrides it.
  const std::string conninfo = WithOptions("-c%20standard_conforming_strings%3Doff");
  {
    pqxx::connection plain(conninfo);
    pqxx::nontransaction work(plain);
    ASSERT_EQ("off", std::string(work.exec1("show standard_conforming_strings")[0].c_str()));
  }
  PostgresStore store(config, conninfo);
  ASSERT_TRUE(store.Open().ok());
  std::vector<std::string> rows;
  ASSERT_TRUE(store.Execute("show standard_conforming_strings", &rows).ok());
  EXPECT_EQ(std::vector<std::string>{"on"}, rows);
  std::unique_ptr<AdministrationLock> lock;
  ASSERT_TRUE(PostgresAdministrationLock::Acquire(config, conninfo, "test", &lock).ok());
}

// A peer that vanishes (packets lost, not refused) is noticed on both ends
// of every connection within about 25 s: the client's side from the
// connection string's defaults, the server's from the session settings (its
// backend then ends and releases the locks of an open transaction).
TEST(SessionSettings, BothEndsNoticeAVanishedPeer) {
  StoreConfig store;
  const std::string url = WithConnectionDefaults("postgresql://h:1/db?keepalives_idle=7", store);
  EXPECT_NE(std::string::npos, url.find("tcp_user_timeout=25000")) << url;
  EXPECT_NE(std::string::npos, url.find("keepalives_idle=7")) << url;  // the user's, kept
  EXPECT_EQ(std::string::npos, url.find("keepalives_idle=10")) << url;
  const std::string keywords = WithConnectionDefaults("host=h port=1", store);
  EXPECT_NE(std::string::npos, keywords.find(" tcp_user_timeout=25000")) << keywords;

  Config config = testing::ConfigOnTestDatabase(
      "store: {schema: x}\nentities: [a]\nprojections: {docs: {from: a}}\n");
  PostgresStore postgres(config, config.store.postgres);  // TCP: the settings apply
  ASSERT_TRUE(postgres.Open().ok());
  std::vector<std::string> rows;
  ASSERT_TRUE(postgres.Execute("select current_setting('tcp_keepalives_idle') || ' ' || "
                               "current_setting('tcp_keepalives_interval') || ' ' || "
                               "current_setting('tcp_keepalives_count') || ' ' || "
                               "current_setting('tcp_user_timeout')", &rows).ok());
  EXPECT_EQ(std::vector<std::string>{"10 5 3 25000"}, rows);
}

TEST(SessionSettings, TheRelaysConnectionHasTheStoresTimeouts) {
  Config config = testing::ConfigOnTestDatabase(
      "store: {schema: x, lock_timeout_ms: 200}\nentities: [a]\n"
      "projections: {docs: {from: a}}\nfeed: {topic: t, brokers: unused:1}\n");
  {
    PostgresStore store(config, config.store.postgres);
    ASSERT_TRUE(store.Open().ok());
  }
  PostgresOutbox outbox(config, config.store.postgres);
  bool claimed = false;
  ASSERT_TRUE(outbox.Claim(&claimed).ok());
  ASSERT_TRUE(claimed);
  // Another session holds the outbox exclusively: without a lock timeout
  // the relay's statement would wait for as long as that session lives.
  pqxx::connection holder(testing::TestPostgresUrl());
  pqxx::work hold(holder);
  hold.exec("lock table " + config.store.schema + ".outbox in access exclusive mode");
  OutboxLag lag;
  Status status = outbox.Lag(&lag);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(std::string::npos, status.message().find("lock timeout")) << status.ToString();
  hold.abort();
  outbox.Disconnect();
  ASSERT_TRUE(outbox.Claim(&claimed).ok());
  EXPECT_TRUE(outbox.Lag(&lag).ok());
}

}  // namespace
}  // namespace denormd
