// The plan hands out one Relation per stored relation: reads that need no
// order (count, ids, a lookup's fan-out) use an ordered relation on the same
// path when the config has one, whatever the order of the fields, so an
// entity keeps one index row per path.
#include <gtest/gtest.h>

#include "projections/projection_plan.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

std::string Fingerprint(const std::string& fields) {
  testing::InMemory m("store: {schema: s}\nentities: [post, comment]\nprojections:\n"
                      "  posts:\n    from: post\n    fields:\n" + fields +
                      "  pages: {buckets: comment, by: postId, order_by: at}\n");
  return m.plan().IndexFingerprint();
}

TEST(ProjectionPlan, UnorderedReadsShareAnOrderedRelationOnTheSamePath) {
  const std::string embed = "      recent: {embed: comment, via: postId, order_by: -at, limit: 3}\n";
  const std::string count = "      n: {count: comment, via: postId}\n";
  const std::string ids = "      all: {ids: comment, via: postId}\n";
  const std::string shared = "comment: [postId order -at] [postId order at group]\n";
  EXPECT_EQ(shared, Fingerprint(embed + count + ids));
  EXPECT_EQ(shared, Fingerprint(count + ids + embed));  // field order does not matter
  // Alone, count keeps its own unordered relation; the buckets' group
  // relation (strings only) is never shared with it.
  EXPECT_EQ("comment: [postId] [postId order at group]\n", Fingerprint(count + ids));
}

TEST(ProjectionPlan, SharedRelationsGiveTheSameDocuments) {
  testing::InMemory m("store: {schema: s}\nentities: [post, comment]\nprojections:\n"
                      "  posts:\n    from: post\n    fields:\n"
                      "      n: {count: comment, via: postId}\n"
                      "      all: {ids: comment, via: postId}\n"
                      "      recent: {embed: comment, via: postId, order_by: -at, limit: 2, select: [id]}\n");
  m.Apply({R"({"type":"post","id":"p","op":"upsert","data":{}})",
           R"({"type":"comment","id":"c1","op":"upsert","data":{"postId":"p","at":1}})",
           R"({"type":"comment","id":"c2","op":"upsert","data":{"postId":"p","at":3}})",
           R"({"type":"comment","id":"c3","op":"upsert","data":{"postId":"p","at":2}})"});
  m.Apply({R"({"type":"comment","id":"c2","op":"delete"})"});
  JsonDocument doc;
  ASSERT_TRUE(ParseJson(m.Documents("posts")["p"].json, &doc).ok());
  EXPECT_EQ(R"({"all":["c1","c3"],"id":"p","n":2,"recent":[{"id":"c3"},{"id":"c1"}]})",
            CanonicalJson(doc));
  EXPECT_EQ(std::vector<std::string>(), m.Differences());
}

}  // namespace
}  // namespace denormd
