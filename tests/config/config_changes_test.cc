// Tests of config/: the log section, and ConfigChanges (what a reload sees).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config/config.h"
#include "formats/format_registry.h"

namespace denormd {
namespace {

constexpr char kBase[] = R"(source:
  kafka: {brokers: "k:9092", topics: [t], group: g}
store: {schema: lib}
batch: {max_events: 100}
entities: [author, book]
projections:
  authors:
    from: author
    fields:
      countOfBooks: {count: book, via: authorIds}
  books:
    from: book
    fields:
      authors: {lookup: author, by: authorIds, select: [id, name]}
)";

Config Parse(const std::string& yaml) {
  std::vector<ConfigError> errors;
  std::optional<Config> config = ParseConfig(yaml, "t.yaml", &errors);
  std::string dump;
  for (const ConfigError& e : errors) dump += e.ToString("t.yaml") + "\n";
  EXPECT_TRUE(config.has_value()) << dump;
  return config.value_or(Config{});
}

// kBase with `from` replaced by `to` (which must occur).
std::string Edited(const std::string& from, const std::string& to) {
  std::string text = kBase;
  const size_t at = text.find(from);
  EXPECT_NE(std::string::npos, at) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::vector<std::string> Changes(const std::string& after) {
  return ConfigChanges(Parse(kBase), Parse(after));
}

using Names = std::vector<std::string>;

TEST(ConfigLog, DefaultsToInfoText) {
  const Config config = Parse(kBase);
  EXPECT_EQ(LogLevel::kInfo, config.log.level);
  EXPECT_EQ(LogFormat::kText, config.log.format);
}

TEST(ConfigLog, ReadsLevelAndFormat) {
  const Config config = Parse(std::string(kBase) + "log: {level: debug, format: json}\n");
  EXPECT_EQ(LogLevel::kDebug, config.log.level);
  EXPECT_EQ(LogFormat::kJson, config.log.format);
}

TEST(ConfigLog, RejectsUnknownValuesAndKeysWithTheirPlace) {
  std::vector<ConfigError> errors;
  const std::string yaml = std::string(kBase) + "log:\n  level: loud\n  format: xml\n  colour: no\n";
  EXPECT_FALSE(ParseConfig(yaml, "t.yaml", &errors).has_value());
  ASSERT_EQ(3u, errors.size());
  EXPECT_EQ("t.yaml:16:10: log.level: level must be debug, info, warn or error, found \"loud\"",
            errors[0].ToString("t.yaml"));
  EXPECT_EQ("t.yaml:17:11: log.format: format must be text or json, found \"xml\"",
            errors[1].ToString("t.yaml"));
  EXPECT_NE(std::string::npos, errors[2].message.find("colour")) << errors[2].message;
}

TEST(ConfigChanges, NoneForTheSameMeaning) {
  EXPECT_EQ(Names{}, Changes(kBase));
  // Another spelling of the same derivation, and a comment.
  EXPECT_EQ(Names{}, Changes(Edited("{count: book, via: authorIds}",
                                    "{via: authorIds, count: book}  # same")));
}

TEST(ConfigChanges, NamesTheLiveSettings) {
  EXPECT_EQ(Names{"batch.max_events"}, Changes(Edited("max_events: 100", "max_events: 7")));
  EXPECT_EQ((Names{"batch.max_delay_ms", "log.level", "log.format"}),
            Changes(Edited("max_events: 100", "max_events: 100, max_delay_ms: 5") +
                    "log: {level: warn, format: json}\n"));
}

TEST(ConfigChanges, NamesSourceStoreEntitiesAndEachProjection) {
  EXPECT_EQ(Names{"source.kafka.brokers"}, Changes(Edited("k:9092", "k2:9092")));
  EXPECT_EQ(Names{"source.kafka.group"}, Changes(Edited("group: g", "group: g2")));
  EXPECT_EQ(Names{"store.schema"}, Changes(Edited("schema: lib", "schema: lib2")));
  EXPECT_EQ(Names{"store.lock_timeout_ms"},
            Changes(Edited("schema: lib", "schema: lib, lock_timeout_ms: 5000")));
  EXPECT_EQ(Names{"entities"}, Changes(Edited("[author, book]", "[author, book, post]")));
  EXPECT_EQ(Names{"projections.books"},
            Changes(Edited("select: [id, name]", "select: [id, name, born]")));
  EXPECT_EQ(Names{"projections.authors"}, Changes(Edited("count: book", "ids: book")));
  // Removed: the name of the projection that is gone.
  const std::string without_books = std::string(kBase).substr(0, std::string(kBase).find("  books:"));
  EXPECT_EQ(Names{"projections.books"}, Changes(without_books));
}

// issue 25: a rotated feed password or a fixed json_columns was reported as
// "changed: none" and stayed old until a restart. Every section is compared;
// values are never named, only the settings.
TEST(ConfigChanges, NamesTheFeedAndEachTopicsInputSettings) {
  const std::string feed = "feed:\n  topic: docs\n  properties: {sasl.password: old-secret}\n";
  const Config with_feed = Parse(std::string(kBase) + feed);
  EXPECT_EQ(Names{}, ConfigChanges(with_feed, Parse(std::string(kBase) + feed)));
  EXPECT_EQ(Names{"feed"}, ConfigChanges(Parse(kBase), with_feed));
  EXPECT_EQ(Names{"feed.properties"},
            ConfigChanges(with_feed, Parse(std::string(kBase) +
                                           "feed:\n  topic: docs\n  properties: {sasl.password: "
                                           "new-secret}\n")));
  EXPECT_EQ((Names{"feed.topic", "feed.max_messages"}),
            ConfigChanges(with_feed, Parse(std::string(kBase) +
                                           "feed:\n  topic: docs2\n  max_messages: 5\n"
                                           "  properties: {sasl.password: old-secret}\n")));

  const std::string debezium =
      Edited("topics: [t]", "topics: [t, {topic: app.public.books, format: debezium, entity: book}]");
  const Config before = Parse(debezium);
  EXPECT_EQ(Names{"source.kafka.topics.app.public.books"},
            ConfigChanges(before, Parse(Edited("topics: [t]",
                                               "topics: [t, {topic: app.public.books, format: "
                                               "debezium, entity: book, json_columns: [tags]}]"))));
  EXPECT_EQ(Names{"source.kafka.topics.app.public.books"},
            ConfigChanges(before, Parse(Edited("topics: [t]",
                                               "topics: [t, {topic: app.public.books, format: "
                                               "debezium, entity: book, id_columns: [isbn]}]"))));
  EXPECT_EQ(Names{"source.kafka.topics.t"},
            ConfigChanges(Parse(kBase),
                          Parse(Edited("topics: [t]",
                                       "topics: [{topic: t, format: debezium, entity: book}]"))));
}

}  // namespace
}  // namespace denormd
