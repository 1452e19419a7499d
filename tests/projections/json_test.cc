// SplitArrayField reads the items of a stored bucket without re-encoding them;
// ParseJson accepts only text whose strings are UTF-8.
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

TEST(ParseJson, RefusesALoneLowSurrogateEscape) {
  JsonDocument doc;
  // RapidJSON alone would encode these as bytes that are not UTF-8.
  for (const char* text : {R"({"n":"\uDDDD800"})", R"(["\udc00"])",
                           R"({"n":"\uD83D\uDE00\uDE00"})", R"({"\uDFFF":1})"}) {
    const Status status = ParseJson(text, &doc);
    EXPECT_TRUE(status.IsInvalidInput()) << text;
    EXPECT_NE(std::string::npos, status.ToString().find("half of a UTF-16 surrogate pair"))
        << status.ToString();
  }
  // A pair, an escaped backslash before "uDC00", and the text outside escapes.
  ASSERT_TRUE(ParseJson(R"({"n":"\uD83D\uDE00 \\uDC00 uDC00"})", &doc).ok());
  EXPECT_EQ("\xF0\x9F\x98\x80 \\uDC00 uDC00", std::string(doc["n"].GetString()));
  // A high half without its low one was already refused by the parser.
  EXPECT_TRUE(ParseJson(R"(["\uD83D"])", &doc).IsInvalidInput());
}

// A zero spelled with more than 22 decimals takes RapidJSON 1.1's
// full-precision path, which normalizes a zero significand with clz(0) and
// read such a zero as a tiny number (-1.7e-195); ParseJson respells those
// zeros first. Strings that look like them, and numbers that are not JSON,
// are left alone.
TEST(ParseJson, AZeroWithManyDecimalsIsZero) {
  for (const char* text : {R"({"n":0.00000000000000000000000000})",
                           R"({"n":-0.000000000000000000000000000000e-5})",
                           R"({"n":0.0000000000000000000000000e30})",
                           R"({"s":"0.00000000000000000000000000", "n":0.00000000000000000000000e7})"}) {
    JsonDocument doc, zero;
    ASSERT_TRUE(ParseJson(text, &doc).ok()) << text;
    ASSERT_TRUE(doc["n"].IsDouble()) << text;
    EXPECT_EQ(0.0, doc["n"].GetDouble()) << text;
    ASSERT_TRUE(ParseJson(R"({"n":0.0})", &zero).ok());
    if (!doc.HasMember("s")) {
      EXPECT_TRUE(JsonEquals(doc, zero)) << text;
    }
  }
  JsonDocument doc;
  ASSERT_TRUE(ParseJson(R"({"s":"0.00000000000000000000000000", "n":-0.0000000000000000000000001})", &doc).ok());
  EXPECT_EQ(std::string("0.00000000000000000000000000"), doc["s"].GetString());
  EXPECT_EQ(-1e-25, doc["n"].GetDouble());
  for (const char* text : {"[0.e5000000000]", "[00.000000000000000000000000]", "[0.0000000000000000000000000e]",
                           "[-.00000000000000000000000000]"}) {
    const Status status = ParseJson(text, &doc);
    EXPECT_TRUE(status.IsInvalidInput()) << text;
  }
  EXPECT_TRUE(ParseJson("[0.000000000000000000000000000 x]", &doc).IsInvalidInput());
  EXPECT_NE(std::string::npos,
            ParseJson("[0.000000000000000000000000000 x]", &doc).ToString().find("at byte 31"));
}

}  // namespace
}  // namespace denormd
