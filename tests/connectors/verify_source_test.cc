// `denormd verify` recomputes every document from the stored source rows by
// its definition, not through the structures the incremental path keeps, and
// checks those structures against the source: each of them corrupted by hand
// in SQL (an index row's order key, a counter, a stable bucket's member keys,
// a bucket's seq) is named by verify and repaired by `denormd rebuild`. And
// the shared-relation case of the issue that verify once missed, on
// PostgreSQL, read back with plain SQL.
#include <gtest/gtest.h>

#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::RunDenormd;
using testing::Sql;

constexpr const char* kProjections = R"(
entities: [post, comment]
projections:
  posts:
    from: post
    fields:
      n: {count: comment, via: postId}
      recent: {embed: comment, via: postId, order_by: -createdAt, limit: 2, select: [id]}
      first2: {embed: comment, via: postId, limit: 2, select: [id]}
  bk_time: {buckets: comment, by: postId, size: 2, order_by: -createdAt, select: [id]}
  bk_none: {buckets: comment, by: postId, size: 2, select: [id], layout: packed}
)";

// The issue's events, then three more comments.
constexpr const char* kEvents =
    R"({"type":"post","id":"p1","op":"upsert","version":1,"data":{}}
{"type":"comment","id":"c1","op":"upsert","version":1,"data":{"postId":"p1","createdAt":3,"author":"zed"}}
{"type":"comment","id":"c2","op":"upsert","version":1,"data":{"postId":"p1","createdAt":1,"author":"amy"}}
{"type":"comment","id":"c3","op":"upsert","version":1,"data":{"postId":"p1","createdAt":2,"author":"kim"}}
{"type":"comment","id":"c4","op":"upsert","version":1,"data":{"postId":"p1","createdAt":5}}
{"type":"comment","id":"c5","op":"upsert","version":1,"data":{"postId":"p1","createdAt":4}}
{"type":"comment","id":"c6","op":"upsert","version":1,"data":{"postId":"p1"}}
)";

class VerifySource : public ::testing::Test {
 protected:
  void SetUp() override {
    schema_ = testing::ConfigOnTestDatabase("store: {schema: x}\n" + std::string(kProjections))
                  .store.schema;
    config_file_ = testing::WriteTempFile(
        "verify.yaml", "store: {schema: " + schema_ + "}\n" + std::string(kProjections));
    const std::string events = testing::WriteTempFile("events.jsonl", kEvents);
    std::string output;
    ASSERT_EQ(0, RunDenormd({"replay", "-c", config_file_, events}, &output)) << output;
    ASSERT_EQ(0, Verify(&output)) << output;
  }

  int Verify(std::string* output) { return RunDenormd({"verify", "-c", config_file_}, output); }

  // Verify names `what` (exit 1), rebuild repairs it, verify is clean again.
  void ExpectNamedAndRepaired(const std::string& what) {
    std::string output;
    EXPECT_EQ(1, Verify(&output)) << output;
    EXPECT_NE(std::string::npos, output.find(what)) << output;
    ASSERT_EQ(0, RunDenormd({"rebuild", "-c", config_file_}, &output)) << output;
    EXPECT_EQ(0, Verify(&output)) << output;
  }

  // Each bucket's member ids in seq order, with plain SQL.
  std::vector<std::string> Buckets(const std::string& table) {
    return Sql("select string_agg(item->>'id', ',' order by n) from " + schema_ + "." + table +
               " b, jsonb_array_elements(b.doc->'items') with ordinality as e(item, n)"
               " group by b.seq order by b.seq");
  }

  std::string schema_;
  std::string config_file_;
};

TEST_F(VerifySource, AnUnorderedUseBesideAnOrderedOneListsByIdOnPostgres) {
  EXPECT_EQ((std::vector<std::string>{"c1,c2", "c3,c4", "c5,c6"}), Buckets("bk_none"));
  // Stable buckets: which bucket holds a member is the layout's choice, the
  // order of the members across buckets is not.
  EXPECT_EQ(std::vector<std::string>{"c4,c5,c1,c3,c2,c6"},
            Sql("select string_agg(item->>'id', ',' order by b.seq, n) from " + schema_ +
                ".bk_time b, jsonb_array_elements(b.doc->'items') with ordinality as e(item, n)"));
  EXPECT_EQ(std::vector<std::string>{"[\"c1\", \"c2\"]\t[\"c4\", \"c5\"]"},
            Sql("select jsonb_path_query_array(doc->'first2', '$[*].id')::text,"
                " jsonb_path_query_array(doc->'recent', '$[*].id')::text from " + schema_ +
                ".posts where id = 'p1'"));
}

TEST_F(VerifySource, NamesADocumentInAnotherProjectionsOrder) {
  Sql("update " + schema_ + ".bk_none set doc = jsonb_set(doc, '{items}', "
      "'[{\"id\": \"c1\"}, {\"id\": \"c3\"}]') where id = 'p1:0'");
  Sql("update " + schema_ + ".bk_none set doc = jsonb_set(doc, '{items}', "
      "'[{\"id\": \"c2\"}, {\"id\": \"c4\"}]') where id = 'p1:1'");
  ExpectNamedAndRepaired("bk_none (bk_none) p1:0: differs");
}

TEST_F(VerifySource, NamesAnIndexRowsOrderKey) {
  Sql("update " + schema_ + ".refs set sort = '\\x7f'::bytea where type = 'comment'"
      " and id = 'c3' and field = 'postId order -createdAt group'");
  ExpectNamedAndRepaired(
      "reference index: comment c3 under p1 [postId order -createdAt group]: order key \\x7f, "
      "expected ");
}

TEST_F(VerifySource, NamesACounterThatDisagreesWithTheSource) {
  Sql("update " + schema_ + ".ref_counts set count = count + 1 where target = 'p1'");
  ExpectNamedAndRepaired("-> p1: 7, the source says 6");
}

TEST_F(VerifySource, NamesAStableBucketsMemberKeys) {
  Sql("update " + schema_ + ".bk_time set member_keys = (select member_keys from " + schema_ +
      ".bk_time where id = 'p1:1') where id = 'p1:0'");
  ExpectNamedAndRepaired("bk_time (bk_time) p1: bucket p1:0: its member_keys column is not its "
                         "members' keys");
}

TEST_F(VerifySource, NamesABucketsSeq) {
  Sql("update " + schema_ + ".bk_none set seq = seq + 7 where id = 'p1:1'");
  ExpectNamedAndRepaired("bk_none (bk_none) p1:1: bucket columns differ: seq is 8, expected 1");
  // In the stable layout, two buckets' seqs swapped put their members out of
  // order.
  Sql("update " + schema_ + ".bk_time set seq = case id when 'p1:0' then (select seq from " +
      schema_ + ".bk_time where id = 'p1:1') else (select seq from " + schema_ +
      ".bk_time where id = 'p1:0') end where id in ('p1:0', 'p1:1')");
  ExpectNamedAndRepaired("bk_time (bk_time) p1: ");
}

TEST_F(VerifySource, SamplesAtMostNDocumentsAProjection) {
  std::string output;
  ASSERT_EQ(0, RunDenormd({"verify", "-c", config_file_, "--sample", "1"}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("all sampled documents match")) << output;
  EXPECT_EQ(2, RunDenormd({"verify", "-c", config_file_, "--sample", "0"}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("verify --sample needs a whole number")) << output;
  // A corrupted counter of the only post is found in any sample.
  Sql("update " + schema_ + ".ref_counts set count = 0 where target = 'p1'");
  EXPECT_EQ(1, RunDenormd({"verify", "-c", config_file_, "--sample", "1"}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("the source says 6")) << output;
}

}  // namespace
}  // namespace denormd
