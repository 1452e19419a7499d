// SplitArrayField reads the items of a stored bucket without re-encoding them.
#include <gtest/gtest.h>

#include "projections/json.h"

namespace denormd {
namespace {

std::vector<std::string> Split(const std::string& object, const std::string& field) {
  std::vector<std::string> items;
  EXPECT_TRUE(SplitArrayField(object, field, &items)) << object;
  return items;
}

TEST(SplitArrayField, ItemsAsSpelledWhateverTheSpacing) {
  // As PostgreSQL prints jsonb: keys by length, ", " and ": ".
  EXPECT_EQ((std::vector<std::string>{R"({"id": "c1", "text": "a, b]"})", R"({"id": "c2"})"}),
            Split(R"({"id": "p:0", "postId": "p", "items": [{"id": "c1", "text": "a, b]"}, {"id": "c2"}]})",
                  "items"));
  EXPECT_EQ((std::vector<std::string>{"1", "\"x\\\"]\"", "[2,[3]]", "null", "{}"}),
            Split("{\"items\":[1,\"x\\\"]\",[2,[3]],null,{}]}", "items"));
  EXPECT_EQ(std::vector<std::string>(), Split(R"( { "items" : [ ] } )", "items"));
}

TEST(SplitArrayField, OnlyTheTopLevelKey) {
  // The same name inside an earlier value, and inside a string, is skipped.
  EXPECT_EQ((std::vector<std::string>{"3"}),
            Split(R"({"a": {"items": [1, 2]}, "b": "\"items\": [9]", "items": [3]})", "items"));
}

TEST(SplitArrayField, FalseWhenThereIsNoSuchArray) {
  std::vector<std::string> items;
  EXPECT_FALSE(SplitArrayField(R"({"id": "p:0"})", "items", &items));
  EXPECT_FALSE(SplitArrayField(R"({"items": {"a": 1}})", "items", &items));
  EXPECT_FALSE(SplitArrayField(R"(["items", [1]])", "items", &items));
  EXPECT_FALSE(SplitArrayField(R"({"items": [1, 2)", "items", &items));  // cut short
  EXPECT_FALSE(SplitArrayField(R"({"a\"b": [1]})", "a\"b", &items));     // would need escaping
}

}  // namespace
}  // namespace denormd
