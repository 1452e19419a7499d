// Tests of common/log: the text and JSON line formats, escaping, names.
#include "common/log.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

namespace denormd {
namespace {

rapidjson::Document ParseJsonLine(const std::string& line) {
  rapidjson::Document document;  // validating UTF-8 too
  document.Parse<rapidjson::kParseValidateEncodingFlag>(line.data(), line.size());
  EXPECT_FALSE(document.HasParseError()) << line;
  EXPECT_TRUE(document.IsObject()) << line;
  return document;
}

TEST(Log, TextLinesAreKeyValuePairs) {
  EXPECT_EQ("ts=T level=warn event=batch_retry attempt=2 error=\"no \\\"db\\\" here\\nreally\"\n",
            FormatLogLine(LogFormat::kText, "T", LogLevel::kWarn, "batch_retry",
                          {{"attempt", 2}, {"error", "no \"db\" here\nreally"}}));
}

TEST(Log, JsonLinesAreObjectsWithTsLevelEventThenFields) {
  const std::string line =
      FormatLogLine(LogFormat::kJson, "2026-11-25T22:30:01.123Z", LogLevel::kInfo,
                    "batch_committed",
                    {{"events", uint64_t{5000}}, {"lag", int64_t{-1}}, {"ms", 84.5},
                     {"schema", "library"}});
  EXPECT_EQ(
      "{\"ts\":\"2026-11-25T22:30:01.123Z\",\"level\":\"info\",\"event\":\"batch_committed\","
      "\"events\":5000,\"lag\":-1,\"ms\":84.500,\"schema\":\"library\"}\n",
      line);
  rapidjson::Document document = ParseJsonLine(line);
  EXPECT_EQ(5000, document["events"].GetInt());
  EXPECT_DOUBLE_EQ(84.5, document["ms"].GetDouble());
}

TEST(Log, JsonEscapesEverythingThatWouldBreakTheLine) {
  const std::string nasty = std::string("q\"b\\n\nr\rt\tc\x01\x1f del\x7f ") + "\xC3\xA9" +
                            "\xE2\x82\xAC" + "\xF0\x9F\x98\x80" + " bad:\xFF\xC3(\xED\xA0\x80";
  const std::string line =
      FormatLogLine(LogFormat::kJson, "T", LogLevel::kError, "x", {{"error", nasty}});
  EXPECT_EQ(1u, std::count(line.begin(), line.end(), '\n')) << line;  // one line
  rapidjson::Document document = ParseJsonLine(line);
  const std::string error = document["error"].GetString();
  EXPECT_EQ(std::string("q\"b\\n\nr\rt\tc\x01\x1f del\x7f ") + "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80" +
                " bad:\xEF\xBF\xBD\xEF\xBF\xBD(\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD",
            error);
}

TEST(Log, SecretsAreRedactedInBothFormats) {
  for (LogFormat format : {LogFormat::kText, LogFormat::kJson}) {
    const std::string line = FormatLogLine(format, "T", LogLevel::kWarn, "store_unavailable",
                                           {{"url", "postgresql://ann:hunter2@db:5432/x"}});
    EXPECT_EQ(std::string::npos, line.find("hunter2")) << line;
    EXPECT_NE(std::string::npos, line.find("ann:***@db")) << line;
  }
}

TEST(Log, NonFiniteNumbersAreStringsInJson) {
  const std::string line = FormatLogLine(LogFormat::kJson, "T", LogLevel::kInfo, "x",
                                         {{"rate", std::nan("")}, {"inf", HUGE_VAL}});
  rapidjson::Document document = ParseJsonLine(line);
  EXPECT_TRUE(document["rate"].IsString());
  EXPECT_TRUE(document["inf"].IsString());
}

TEST(Log, NamesParseBack) {
  for (LogLevel level : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    LogLevel parsed = LogLevel::kInfo;
    ASSERT_TRUE(ParseLogLevel(LogLevelName(level), &parsed));
    EXPECT_EQ(level, parsed);
  }
  LogFormat format = LogFormat::kText;
  EXPECT_TRUE(ParseLogFormat("json", &format));
  EXPECT_EQ(LogFormat::kJson, format);
  EXPECT_FALSE(ParseLogFormat("JSON", &format));
  LogLevel level;
  EXPECT_FALSE(ParseLogLevel("warning", &level));
}

}  // namespace
}  // namespace denormd
