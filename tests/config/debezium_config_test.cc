// Tests of the per-topic input formats of source.kafka.topics (format:
// debezium, entity, id_columns, json_columns): what parses, and one test per
// kind of error, with its place.
#include <cctype>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config/config.h"
#include "formats/debezium_format.h"
#include "formats/format_registry.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

std::string Dump(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const ConfigError& e : errors) out += "  " + e.ToString("t.yaml") + "\n";
  return out;
}

// A config whose topics list is `topics` (written from line 5 on).
std::string WithTopics(const std::string& topics) {
  return "source:\n  kafka:\n    brokers: b:9092\n    group: g\n    topics:\n" + topics +
         "store: {schema: lib}\nentities: [author, books, book_author]\nprojections:\n"
         "  authors: {from: author}\n";
}

TEST(DebeziumConfig, TopicsParseWithTheirFormats) {
  std::vector<ConfigError> errors;
  std::optional<Config> config = ParseConfig(WithTopics(R"(      - native.events
      - {topic: app.public.books, format: debezium}
      - topic: app.public.book_authors
        format: debezium
        entity: book_author
        id_columns: [book_id, author_id]
        json_columns: [meta, tags]
      - {topic: '^app\.x\..*', format: debezium, entity: author}
      - {topic: other.events, format: native}
)"),
                                             "t.yaml", &errors);
  ASSERT_TRUE(config.has_value()) << Dump(errors);
  const KafkaSourceConfig& kafka = *config->kafka;
  ASSERT_EQ(5u, kafka.inputs.size());
  EXPECT_EQ((std::vector<std::string>{"native.events", "app.public.books", "app.public.book_authors",
                                      "^app\\.x\\..*", "other.events"}),
            kafka.topics);
  EXPECT_EQ("native", kafka.inputs[0].format->name());
  EXPECT_EQ("debezium", kafka.inputs[1].format->name());
  EXPECT_EQ("", DebeziumSettingsOf(kafka.inputs[1]).entity);  // the table name, "books"
  const DebeziumSettings& book_authors = DebeziumSettingsOf(kafka.inputs[2]);
  EXPECT_EQ("book_author", book_authors.entity);
  EXPECT_EQ((std::vector<std::string>{"book_id", "author_id"}), book_authors.id_columns);
  EXPECT_EQ((std::vector<std::string>{"meta", "tags"}), book_authors.json_columns);
  EXPECT_TRUE(kafka.inputs[3].IsPattern());
  EXPECT_EQ("native", kafka.inputs[4].format->name());
  EXPECT_EQ(8, kafka.inputs[2].place.line);
}

struct BadTopic {
  const char* topics;
  const char* message;
  int line;
  int column;
  const char* where;
};

class DebeziumConfigErrorTest : public ::testing::TestWithParam<BadTopic> {};

TEST_P(DebeziumConfigErrorTest, IsReportedWithItsPlace) {
  const BadTopic& bad = GetParam();
  std::vector<ConfigError> errors;
  std::optional<Config> config = ParseConfig(WithTopics(bad.topics), "t.yaml", &errors);
  EXPECT_FALSE(config.has_value());
  ASSERT_EQ(1u, errors.size()) << Dump(errors);
  EXPECT_NE(std::string::npos, errors[0].message.find(bad.message)) << Dump(errors);
  EXPECT_EQ(bad.line, errors[0].place.line) << Dump(errors);
  EXPECT_EQ(bad.column, errors[0].place.column) << Dump(errors);
  EXPECT_EQ(bad.where, errors[0].where);
}

INSTANTIATE_TEST_SUITE_P(
    Errors, DebeziumConfigErrorTest,
    ::testing::Values(
        BadTopic{"      - {topic: t, format: debezum, entity: author}\n",
                 "unknown format \"debezum\" (expected native or debezium) (did you mean "
                 "\"debezium\"?)",
                 6, 28, "source.kafka.topics[0].format"},
        BadTopic{"      - {topic: app.public.authors, format: debezium}\n",
                 "topic \"app.public.authors\" maps to the entity type \"authors\" (its table "
                 "name), which is not in entities",
                 6, 17, "source.kafka.topics[0].topic"},
        BadTopic{"      - {topic: t, format: debezium, entity: autor}\n",
                 "unknown entity type \"autor\" (not in entities) (did you mean \"author\"?)", 6,
                 46, "source.kafka.topics[0].entity"},
        BadTopic{"      - {topic: t, entity: author}\n",
                 "\"entity\" is only allowed with format: debezium", 6, 28,
                 "source.kafka.topics[0].entity"},
        BadTopic{"      - {topic: t, format: debezium, entity: author, json_columns: []}\n",
                 "must not be an empty list", 6, 68, "source.kafka.topics[0].json_columns"},
        BadTopic{"      - {topic: t, format: debezium, entity: author, id_columns: [a, a]}\n",
                 "column \"a\" is listed twice", 6, 66, "source.kafka.topics[0].id_columns"},
        BadTopic{"      - {topic: '^a(', format: debezium, entity: author}\n",
                 "topic pattern \"^a(\" is not a valid regular expression", 6, 17,
                 "source.kafka.topics[0].topic"},
        BadTopic{"      - t\n      - {topic: t, format: debezium, entity: author}\n",
                 "duplicate topic \"t\" (also topics[0])", 7, 9, "source.kafka.topics[1]"},
        BadTopic{"      - {format: debezium, entity: author}\n", "missing required key \"topic\"",
                 6, 9, "source.kafka.topics[0].topic"},
        BadTopic{"      - {topic: t, formats: debezium}\n",
                 "unknown key \"formats\" (did you mean \"format\"?)", 6, 20,
                 "source.kafka.topics[0].formats"},
        BadTopic{"      - [t]\n", "expected a topic name or a map", 6, 9,
                 "source.kafka.topics[0]"}),
    // "<index>_<the key in error>": a pointer printed by default would change every build.
    [](const ::testing::TestParamInfo<BadTopic>& info) {
      const std::string where = info.param.where;
      std::string name = std::to_string(info.index) + "_";
      for (char c : where.substr(where.find_last_of('.') + 1)) {
        name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      }
      return name;
    });

TEST(DebeziumConfig, TheApplicationConfigParses) {
  std::vector<ConfigError> errors;
  std::optional<Config> config =
      LoadConfig(testing::SourcePath("tests/data/debezium/config.yaml"), &errors);
  ASSERT_TRUE(config.has_value()) << Dump(errors);
  EXPECT_EQ(5u, config->kafka->inputs.size());
  for (const TopicInput& input : config->kafka->inputs) {
    EXPECT_EQ("debezium", input.format->name()) << input.topic;
    EXPECT_FALSE(DebeziumSettingsOf(input).entity.empty());
  }
}

}  // namespace
}  // namespace denormd
