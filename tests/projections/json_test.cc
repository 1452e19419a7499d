// SplitArrayField reads the items of a stored bucket without re-encoding them;
// ParseJson accepts only text whose strings are UTF-8; StringOfOrderKey
// gives back the string of an ascending OrderKey and nothing else.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

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

// RapidJSON 1.1's own full-precision path read such a zero as a tiny number
// (-1.7e-195, after an undefined clz(0)); ParseJson reads numbers itself.
// Strings that look like them, and numbers that are not JSON, are left alone.
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

// Numbers RapidJSON 1.1's full-precision conversion got wrong (its upstream
// fix for the first came in 2024): each reads as the double nearest to it.
TEST(ParseJson, NumbersReadAsTheNearestDouble) {
  JsonDocument doc;
  for (const char* text : {"0.184467440737095516159", "2.220446049250313e-16", "1.7976931348623157e308",
                           "4.9e-324", "2.2250738585072011e-308", "-123.456e-7", "1e23", "8.5e-1"}) {
    ASSERT_TRUE(ParseJson(text, &doc).ok()) << text;
    ASSERT_TRUE(doc.IsDouble()) << text;
    EXPECT_EQ(std::strtod(text, nullptr), doc.GetDouble()) << text;
  }
  // Every power of two from 2^-1 to 2^-1074, written with 17 digits, and
  // doubles spread over the whole range, written with 17 digits.
  std::vector<double> values;
  for (int n = 1; n <= 1074; ++n) values.push_back(std::ldexp(1.0, -n));
  uint64_t bits = 0x9E3779B97F4A7C15u;
  for (int i = 0; i < 20000; ++i) {
    bits = bits * 6364136223846793005u + 1442695040888963407u;
    double value;
    std::memcpy(&value, &bits, sizeof value);
    if (std::isfinite(value)) values.push_back(value);
  }
  int wrong = 0;
  for (const double value : values) {
    char text[40];
    std::snprintf(text, sizeof text, "%.17g", value);
    const std::string spelled = std::strpbrk(text, ".e") == nullptr ? std::string(text) + ".0" : text;
    if (!ParseJson(spelled, &doc).ok() || !doc.IsDouble() || doc.GetDouble() != value) {
      if (++wrong <= 5) ADD_FAILURE() << spelled << " read as " << (doc.IsDouble() ? doc.GetDouble() : 0);
    }
  }
  EXPECT_EQ(0, wrong) << "of " << values.size();
  // Beyond the largest double: refused where the number starts; below the
  // smallest: zero.
  for (const char* text : {"[1, 1e309]", "[1, 1.8e308]", "[1, -2e308]", "[1, 1797693134862315800000000000000000000000000000000"
                           "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
                           "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
                           "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"}) {
    const Status status = ParseJson(text, &doc);
    EXPECT_TRUE(status.IsInvalidInput()) << text;
    EXPECT_NE(std::string::npos, status.ToString().find("not valid JSON at byte 4: number too big to be stored in double"))
        << status.ToString();
    EXPECT_TRUE(doc.IsNull());
  }
  ASSERT_TRUE(ParseJson("[1e-400, -1e-400]", &doc).ok());
  EXPECT_EQ(0.0, doc[0].GetDouble());
  EXPECT_TRUE(std::signbit(doc[1].GetDouble()));
}

// Integers keep RapidJSON's types: unsigned when not negative (32 bits, then
// 64), signed when negative, a double only beyond 64 bits; "-0" is 0.
TEST(ParseJson, IntegersKeepTheirWidth) {
  JsonDocument doc;
  ASSERT_TRUE(ParseJson("[0, -0, 4294967295, 4294967296, 18446744073709551615, 18446744073709551616,"
                        " -2147483648, -2147483649, -9223372036854775808, -9223372036854775809, 1700099656903]",
                        &doc).ok());
  EXPECT_TRUE(doc[0].IsUint() && doc[0].GetUint() == 0);
  EXPECT_TRUE(doc[1].IsInt() && !doc[1].IsDouble() && doc[1].GetInt() == 0);
  EXPECT_TRUE(doc[2].IsUint() && doc[2].GetUint() == 4294967295u);
  EXPECT_TRUE(!doc[3].IsUint() && doc[3].IsUint64() && doc[3].GetUint64() == 4294967296u);
  EXPECT_TRUE(doc[4].IsUint64() && doc[4].GetUint64() == UINT64_MAX);
  EXPECT_TRUE(doc[5].IsDouble() && doc[5].GetDouble() == 18446744073709551616.0);
  EXPECT_TRUE(doc[6].IsInt() && doc[6].GetInt() == INT32_MIN);
  EXPECT_TRUE(!doc[7].IsInt() && doc[7].IsInt64() && doc[7].GetInt64() == -2147483649);
  EXPECT_TRUE(doc[8].IsInt64() && doc[8].GetInt64() == INT64_MIN);
  EXPECT_TRUE(doc[9].IsDouble() && doc[9].GetDouble() == -9223372036854775809.0);
  EXPECT_TRUE(doc[10].IsUint64() && doc[10].GetUint64() == 1700099656903u);
  // A number that is not JSON is refused where RapidJSON finds it.
  for (const auto& bad : {std::make_pair("[1.]", "not valid JSON at byte 3: miss fraction part in number"),
                          std::make_pair("[1e]", "not valid JSON at byte 3: miss exponent in number"),
                          std::make_pair("[-]", "not valid JSON at byte 2: invalid value"),
                          std::make_pair("[01]", "not valid JSON at byte 2: ")}) {
    const Status status = ParseJson(bad.first, &doc);
    EXPECT_NE(std::string::npos, status.ToString().find(bad.second)) << status.ToString();
  }
}

TEST(StringOfOrderKey, GivesBackTheStringOfAnAscendingKeyOnly) {
  JsonDocument doc;
  doc.Parse(R"(["b1", "", "a\u00e9z", 7, ["b1"], true, null])");
  ASSERT_FALSE(doc.HasParseError());
  const auto& items = doc.GetArray();
  for (int i = 0; i < 3; ++i) {
    const std::string text(items[i].GetString(), items[i].GetStringLength());
    EXPECT_EQ(std::optional<std::string>(text), StringOfOrderKey(OrderKey(&items[i], false)));
    EXPECT_EQ(std::nullopt, StringOfOrderKey(OrderKey(&items[i], true))) << text;
  }
  for (int i = 3; i < 7; ++i) EXPECT_EQ(std::nullopt, StringOfOrderKey(OrderKey(&items[i], false)));
  EXPECT_EQ(std::nullopt, StringOfOrderKey(OrderKey(nullptr, false)));
  EXPECT_EQ(std::nullopt, StringOfOrderKey(""));
}

}  // namespace
}  // namespace denormd
