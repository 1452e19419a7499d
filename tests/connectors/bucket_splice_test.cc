// Packed bucket tails on PostgreSQL are spliced from the stored buckets as
// PostgreSQL prints them (jsonb text: its own spacing, key order and
// escapes), and stay exact; a stored bucket edited behind denormd's back
// makes the group render from its entities instead.
#include <gtest/gtest.h>

#include "projections/maintenance.h"
#include "daemon/replay.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

constexpr int kComments = 250;  // buckets p:0 .. p:2 of 100

// Comment texts that JSON and jsonb spell differently.
std::string Text(int i) {
  static const char* const kTexts[] = {
      R"(plain)", R"(quote \" and backslash \\)", R"(tab\tnew\nline)", R"(caf\u00e9 \ud83d\ude00)",
      R"(bracket ] brace } comma ,)", R"(\u0001 control)"};
  return kTexts[i % 6];
}

class BucketSpliceOnPostgres : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string load;
    for (int i = 0; i < kComments; ++i) {
      load += R"({"type":"comment","id":"c)" + std::to_string(1000 + i) +
              R"(","op":"upsert","data":{"postId":"p","createdAt":)" + std::to_string(i) +
              R"(,"author":{"name":"a","n":1.50},"comment":")" + Text(i) + R"("}})" "\n";
    }
    BatchStats stats;
    Apply(load, &stats);
  }

  void Apply(const std::string& events, BatchStats* stats) {
    ReplayReport report;
    Status status = ReplayLog(article_.decoder, article_.applier, &article_.store,
                              testing::WriteTempFile("events" + std::to_string(++files_) + ".jsonl",
                                                     events),
                              ReplayOptions(), &report);
    ASSERT_TRUE(status.ok()) << status.ToString();
    *stats = report.stats;
  }

  std::vector<std::string> Differences() {
    std::vector<std::string> differences;
    EXPECT_TRUE(Verify(article_.plan, &article_.store, MaintenanceOptions(), &differences)
                    .ok());
    return differences;
  }

  testing::ArticleOnPostgres article_{testing::UsePackedBuckets};
  int files_ = 0;
};

TEST_F(BucketSpliceOnPostgres, DeletesAndMovesNearTheStartShiftEveryBucketExactly) {
  BatchStats stats;
  Apply(R"({"type":"comment","id":"c1003","op":"delete"})" "\n"
        R"({"type":"comment","id":"c1010","op":"patch","data":{"createdAt":500}})" "\n"
        R"({"type":"comment","id":"c1150","op":"patch","data":{"comment":"edited \u00e9"}})" "\n",
        &stats);
  EXPECT_EQ(1u, stats.tails_spliced);
  EXPECT_EQ(0u, stats.tails_rendered);
  EXPECT_EQ(std::vector<std::string>(), Differences());
  // p:0 was c1000..c1099: c1003 is gone and c1010 moved to the end.
  EXPECT_EQ(std::vector<std::string>({"c1011"}),
            testing::Sql("select doc->'comments'->9->>'id' from " + article_.config.store.schema +
                         ".post_comments where id = 'p:0'"));
}

TEST_F(BucketSpliceOnPostgres, AnEditedStoredBucketIsRenderedFromTheEntities) {
  const std::string table = article_.config.store.schema + ".post_comments";
  testing::Sql("update " + table +
               " set doc = jsonb_set(doc, '{comments}', (doc->'comments') - 0) where id = 'p:1'");
  BatchStats stats;
  Apply(R"({"type":"comment","id":"c1000","op":"delete"})" "\n", &stats);
  EXPECT_EQ(0u, stats.tails_spliced);
  EXPECT_EQ(1u, stats.tails_rendered);
  EXPECT_EQ(std::vector<std::string>(), Differences());
}

}  // namespace
}  // namespace denormd
