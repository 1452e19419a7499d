// Incremental maintenance equals recomputation from scratch: random batches of
// inserts, patches, moves and deletes (with ties, absent and mixed-type order
// values), after each of which `verify` (a full recompute) finds nothing.
// Covers bucket tails, top-N embeds read by index order, counts and ids.
#include <functional>
#include <random>
#include <tuple>

#include <gtest/gtest.h>

#include "formats/format_registry.h"
#include "formats/native_format.h"
#include "projections/batch_applier.h"
#include "projections/maintenance.h"
#include "projections/memory_store.h"

namespace denormd {
namespace {

constexpr const char* kConfig = R"(
store: {schema: prop}
entities: [post, comment]
projections:
  posts:
    from: post
    fields:
      newest: {embed: comment, via: postId, order_by: -at, limit: 3, select: [id, at]}
      oldest: {embed: comment, via: postId, order_by: at, limit: 2}
      byId: {embed: comment, via: postId, limit: 2, select: [id]}
      count: {count: comment, via: postId}
      ids: {ids: comment, via: postId}
  pages_up:   {buckets: comment, by: postId, size: 3, order_by: at, select: [id, at, text]}
  pages_down: {buckets: comment, by: postId, size: 4, order_by: -at, select: [id, at, text]}
  pages_id:   {buckets: comment, by: postId, size: 2, select: [id, text]}
  pages_text: {buckets: comment, by: postId, size: 3, order_by: at, select: [text]}
)";

std::string RandomAt(std::mt19937& random) {
  switch (random() % 8) {
    case 0: return "";                                   // absent
    case 1: return R"("at": null,)";
    case 2: return R"("at": ")" + std::to_string(random() % 5) + R"(",)";  // strings after numbers
    case 3: return R"("at": 1.5,)";
    default: return R"("at": )" + std::to_string(random() % 6) + ",";      // many ties
  }
}

// (bucket layout, bucket page rows)
class IncrementalProperty
    : public ::testing::TestWithParam<std::tuple<std::string, uint64_t>> {};

// kConfig with every bucket projection in `layout`.
std::string ConfigWithLayout(const std::string& layout) {
  std::string text = kConfig;
  for (size_t at = 0; (at = text.find("select: [", text.find("{buckets:", at))) != std::string::npos;) {
    const size_t end = text.find("]}", at);
    if (end == std::string::npos) break;
    text.insert(end + 1, ", layout: " + layout);
    at = end;
  }
  return text;
}

TEST_P(IncrementalProperty, EveryBatchEqualsARecomputeFromScratch) {
  std::vector<ConfigError> errors;
  const std::string text = ConfigWithLayout(std::get<0>(GetParam()));
  std::optional<Config> config = ParseConfig(text, "prop.yaml", &errors);
  ASSERT_TRUE(config.has_value()) << (errors.empty() ? "" : errors[0].ToString("prop.yaml"));
  const auto layout = std::get<0>(GetParam()) == "stable" ? ProjectionConfig::BucketLayout::kStable
                                                          : ProjectionConfig::BucketLayout::kPacked;
  for (const ProjectionConfig& projection : config->projections) {
    if (projection.kind == ProjectionConfig::Kind::kBuckets) {
      ASSERT_EQ(layout, projection.layout);
    }
  }
  PlanOptions options;
  options.bucket_page_rows = std::get<1>(GetParam());
  ProjectionPlan plan(*config, options);
  BatchApplier applier(plan);
  NativeDecoder decoder(*config);
  MemoryStore store;
  std::mt19937 random(7);
  int64_t position = 0;
  BatchStats total;
  for (int batch_number = 0; batch_number < 150; ++batch_number) {
    std::vector<RawRecord> raw;
    int size = 1 + random() % 12;
    for (int i = 0; i < size; ++i) {
      std::string id = "c" + std::to_string(random() % 40);
      std::string post = "p" + std::to_string(random() % 3);
      std::string json;
      switch (random() % 6) {
        case 0:
          json = R"({"type":"comment","id":")" + id + R"(","op":"delete"})";
          break;
        case 1:
          json = R"({"type":"comment","id":")" + id + R"(","op":"patch","data":{)" +
                 RandomAt(random) + R"("postId":")" + post + R"("}})";
          break;
        case 2:  // in place: only what the buckets show changes
          json = R"({"type":"comment","id":")" + id + R"(","op":"patch","data":{"text":")" +
                 std::to_string(random() % 3) + R"("}})";
          break;
        default:
          json = R"({"type":"comment","id":")" + id + R"(","op":"upsert","data":{)" +
                 RandomAt(random) + R"("postId":")" + post + R"("}})";
      }
      if (random() % 10 == 0) {
        json = R"({"type":"post","id":")" + post + R"(","op":"upsert","data":{"n":1}})";
      }
      RawRecord record;
      record.at = {"prop", 0, ++position};
      record.value = json;
      raw.push_back(record);
    }
    BatchStats stats;
    ASSERT_TRUE(applier.Apply(&store, DecodeBatch(decoder, raw), &stats).ok());
    total.Add(stats);
    std::vector<std::string> differences;
    ASSERT_TRUE(Verify(plan, &store, MaintenanceOptions(), &differences).ok());
    ASSERT_TRUE(differences.empty()) << "after batch " << batch_number << ": " << differences[0];
  }
  // The scenario did exercise the buckets: several pages exist, and tails
  // were spliced from the stored buckets, which always fit.
  EXPECT_GT(store.state().collections.at("pages_up").size(), 5u);
  EXPECT_GT(total.tails_spliced, 100u);
  EXPECT_EQ(0u, total.tails_rendered);
}

// Both layouts; packed tails read in pages of 1 (clamped to the bucket size),
// 5 and 2000.
INSTANTIATE_TEST_SUITE_P(
    Layouts, IncrementalProperty,
    ::testing::Values(std::make_tuple("stable", 2000), std::make_tuple("packed", 1),
                      std::make_tuple("packed", 5), std::make_tuple("packed", 2000)),
    [](const ::testing::TestParamInfo<std::tuple<std::string, uint64_t>>& info) {
      return std::get<0>(info.param) + "Pages" + std::to_string(std::get<1>(info.param));
    });

// Post p with comments c1..c10 (at 1..10) in buckets of 3: p:0 .. p:3.
class BucketSplice : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<ConfigError> errors;
    config_ = ParseConfig(R"(
store: {schema: splice}
entities: [comment]
projections:
  pages: {buckets: comment, by: postId, size: 3, order_by: at, select: [id, text], layout: packed}
)", "splice.yaml", &errors);
    ASSERT_TRUE(config_.has_value());
    plan_ = std::make_unique<ProjectionPlan>(*config_);
    applier_ = std::make_unique<BatchApplier>(*plan_);
    std::vector<std::string> comments;
    for (int i = 1; i <= 10; ++i) {
      comments.push_back(R"({"type":"comment","id":"c)" + std::to_string(i) +
                         R"(","op":"upsert","data":{"postId":"p","at":)" + std::to_string(i) +
                         R"(,"text":"t)" + std::to_string(i) + R"("}})");
    }
    Apply(comments);
    ASSERT_EQ(4u, Pages().size());
  }

  BatchStats Apply(const std::vector<std::string>& events) {
    std::vector<RawRecord> raw;
    for (const std::string& json : events) {
      RawRecord record;
      record.at = {"splice", 0, ++position_};
      record.value = json;
      raw.push_back(record);
    }
    BatchStats stats;
    EXPECT_TRUE(applier_->Apply(&store_, DecodeBatch(NativeDecoder(*config_), raw), &stats).ok());
    return stats;
  }

  std::vector<std::string> Differences() {
    std::vector<std::string> differences;
    EXPECT_TRUE(Verify(*plan_, &store_, MaintenanceOptions(), &differences).ok());
    return differences;
  }

  std::map<std::string, MemoryState::Document>& Pages() {
    return store_.mutable_state()->collections["pages"];
  }

  std::optional<Config> config_;
  std::unique_ptr<ProjectionPlan> plan_;
  std::unique_ptr<BatchApplier> applier_;
  MemoryStore store_;
  int64_t position_ = 0;
};

TEST_F(BucketSplice, EditBeforeTheFirstShiftInItsBucket) {
  // c4 (first of p:1) edited in place, c5 (second of p:1) deleted.
  BatchStats stats = Apply({R"({"type":"comment","id":"c4","op":"patch","data":{"text":"new"}})",
                            R"({"type":"comment","id":"c5","op":"delete"})"});
  EXPECT_EQ(1u, stats.tails_spliced);
  EXPECT_EQ(0u, stats.tails_rendered);
  EXPECT_EQ(std::vector<std::string>(), Differences());
  EXPECT_NE(std::string::npos, Pages()["p:1"].json.find("new"));
}

TEST_F(BucketSplice, MovesWithinAndAcrossGroups) {
  BatchStats stats = Apply({
      R"({"type":"comment","id":"c2","op":"patch","data":{"at":8.5}})",      // later in p
      R"({"type":"comment","id":"c9","op":"patch","data":{"at":0}})",        // first in p
      R"({"type":"comment","id":"c6","op":"patch","data":{"postId":"q"}})",  // leaves p
      R"({"type":"comment","id":"c11","op":"upsert","data":{"postId":"p","at":3.5}})",
  });
  EXPECT_EQ(2u, stats.tails_spliced);  // p, and q (new)
  EXPECT_EQ(0u, stats.tails_rendered);
  EXPECT_EQ(std::vector<std::string>(), Differences());
}

// When the stored buckets do not fit, the group is rendered from its
// entities instead, and the result is exact.
struct StoredBucketEdit {
  const char* name;
  std::function<void(std::map<std::string, MemoryState::Document>* pages)> edit;
};

void PrintTo(const StoredBucketEdit& edit, std::ostream* os) { *os << edit.name; }

class StoredBucketsEdited : public BucketSplice,
                            public ::testing::WithParamInterface<StoredBucketEdit> {};

TEST_P(StoredBucketsEdited, TailIsRenderedFromTheEntities) {
  GetParam().edit(&Pages());
  BatchStats stats = Apply({R"({"type":"comment","id":"c1","op":"delete"})"});  // shifts all
  EXPECT_EQ(0u, stats.tails_spliced);
  EXPECT_EQ(1u, stats.tails_rendered);
  EXPECT_EQ(std::vector<std::string>(), Differences());
  EXPECT_EQ(3u, Pages().size());
}

INSTANTIATE_TEST_SUITE_P(
    Edits, StoredBucketsEdited,
    ::testing::Values(
        StoredBucketEdit{"BucketMissing", [](auto* pages) { pages->erase("p:2"); }},
        StoredBucketEdit{"ItemMissing",
                         [](auto* pages) {
                           (*pages)["p:1"].json =
                               R"({"id":"p:1","postId":"p","items":[{"id":"c4","text":"t4"}]})";
                         }},
        StoredBucketEdit{"ItemsFieldMissing",
                         [](auto* pages) { (*pages)["p:3"].json = R"({"id":"p:3"})"; }},
        StoredBucketEdit{"ItemNotWhatItsMemberRendersTo",  // e.g. `select` changed, no rebuild
                         [](auto* pages) {
                           (*pages)["p:0"].json =
                               R"({"id":"p:0","postId":"p","items":[{"id":"c1","text":"t1"},)"
                               R"({"id":"c2"},{"id":"c3","text":"t3"}]})";
                         }}),
    [](const ::testing::TestParamInfo<StoredBucketEdit>& info) { return info.param.name; });

TEST(OrderKey, OrdersLikeTheContract) {
  JsonDocument doc;
  ASSERT_TRUE(ParseJson(R"([-2.5, -1, 0, 3, 10, "", "a", "ab", "b", false, true, [1], {}])", &doc)
                  .ok());
  for (rapidjson::SizeType i = 0; i + 1 < doc.Size(); ++i) {
    std::string a = OrderKey(&doc[i], false), b = OrderKey(&doc[i + 1], false);
    if (doc[i].IsArray() || doc[i].IsObject()) continue;  // arrays < objects only by rank
    EXPECT_LT(a, b) << ToJson(doc[i]) << " vs " << ToJson(doc[i + 1]);
    EXPECT_GT(OrderKey(&doc[i], true), OrderKey(&doc[i + 1], true)) << ToJson(doc[i]);
  }
  JsonValue null_value;
  for (bool descending : {false, true}) {
    EXPECT_LT(OrderKey(&doc[0], descending), OrderKey(nullptr, descending));
    EXPECT_LT(OrderKey(&doc[12], descending), OrderKey(&null_value, descending));
    EXPECT_EQ(OrderKey(nullptr, descending), OrderKey(&null_value, descending));
  }
}

}  // namespace
}  // namespace denormd
