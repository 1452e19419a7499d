// Incremental maintenance equals recomputation from scratch: random batches of
// inserts, patches, moves and deletes (with ties, absent and mixed-type order
// values), after each of which `verify` (a full recompute) finds nothing.
// Covers bucket tails, top-N embeds read by index order, counts and ids.
#include <random>

#include <gtest/gtest.h>

#include "daemon/maintenance.h"
#include "projections/batch_applier.h"
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

class IncrementalProperty : public ::testing::TestWithParam<uint64_t> {};

TEST_P(IncrementalProperty, EveryBatchEqualsARecomputeFromScratch) {
  std::vector<ConfigError> errors;
  std::optional<Config> config = ParseConfig(kConfig, "prop.yaml", &errors);
  ASSERT_TRUE(config.has_value()) << (errors.empty() ? "" : errors[0].ToString("prop.yaml"));
  ProjectionPlan plan(*config);
  BatchApplier applier(plan, /*tail_page_rows=*/GetParam());
  MemoryStore store;
  std::mt19937 random(7);
  int64_t position = 0;
  for (int batch_number = 0; batch_number < 150; ++batch_number) {
    std::vector<RawEvent> raw;
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
      RawEvent event;
      event.at = {"prop", 0, ++position};
      event.bytes = json;
      raw.push_back(event);
    }
    BatchStats stats;
    ASSERT_TRUE(applier.Apply(&store, DecodeBatch(*config, raw), &stats).ok());
    std::vector<std::string> differences;
    ASSERT_TRUE(Verify(plan, applier, &store, MaintenanceOptions(), &differences).ok());
    ASSERT_TRUE(differences.empty()) << "after batch " << batch_number << ": " << differences[0];
  }
  // The scenario did exercise the buckets: several pages exist.
  EXPECT_GT(store.state().collections.at("pages_up").size(), 5u);
}

// Bucket tails read in pages of 1 (clamped to the bucket size), 5 and 2000.
INSTANTIATE_TEST_SUITE_P(TailPages, IncrementalProperty, ::testing::Values(1, 5, 2000));

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
