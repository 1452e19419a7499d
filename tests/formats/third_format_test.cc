// A third input format, test-only, to show what adding one takes: this file
// (the format, "pipe", and its tests) and one registry line (WithPipe() below;
// a built-in format's line is in formats/format_registry.cc). Nothing else
// changed for it: not config/ (its key `separator` is read, and its errors
// placed, through the TopicReader), not the input decoder, not the Kafka
// source (it asks the format).
//
// The format: a record is "TYPE|ID|DATA" (an upsert of the JSON object DATA)
// or "TYPE|ID" (a delete), with `separator` in place of '|'. Its version
// rule: none (every event applies). A tombstone is a dead letter.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config/config.h"
#include "formats/format_registry.h"
#include "formats/input_decoder.h"
#include "formats/json_input.h"

namespace denormd {
namespace {

struct PipeSettings : InputSettings {
  char separator = '|';
  std::string Normalized() const override { return std::string("separator ") + separator; }
};

class PipeDecoder : public Decoder {
 public:
  PipeDecoder(const Config& config, const PipeSettings& settings)
      : config_(config), settings_(settings) {}

  Status Decode(const RawRecord& record, std::vector<EntityEvent>* events,
                bool* skipped) const override {
    *skipped = false;
    if (!record.value) return Status::InvalidInput("a pipe record needs a value");
    const std::string& text = *record.value;
    const size_t first = text.find(settings_.separator);
    if (first == std::string::npos) return Status::InvalidInput("expected TYPE|ID[|DATA]");
    const size_t second = text.find(settings_.separator, first + 1);
    EntityEvent event;
    event.key.type = text.substr(0, first);
    const size_t id_length = second == std::string::npos ? second : second - first - 1;
    event.key.id = text.substr(first + 1, id_length);
    if (!config_.HasEntity(event.key.type) || event.key.id.empty()) {
      return Status::InvalidInput("unknown entity type or empty id");
    }
    event.op = EventOp::kDelete;
    if (second != std::string::npos) {
      event.op = EventOp::kUpsert;
      auto data = NewEntityJson();
      DENORMD_RETURN_IF_ERROR(ParseInputJson(text.substr(second + 1), data.get()));
      if (!data->IsObject()) return Status::InvalidInput("DATA must be a JSON object");
      event.data = std::move(data);
    }
    events->push_back(std::move(event));
    return Status::Ok();
  }

 private:
  const Config& config_;
  const PipeSettings& settings_;
};

class PipeFormat : public InputFormat {
 public:
  const std::string& name() const override { return name_; }
  const std::vector<std::string>& keys() const override { return keys_; }

  std::shared_ptr<const InputSettings> Parse(TopicReader& reader) const override {
    auto settings = std::make_shared<PipeSettings>();
    if (!reader.Has("separator")) return settings;
    std::string separator;
    if (!reader.ReadString("separator", &separator)) return nullptr;
    if (separator.size() != 1) {
      reader.Error("separator", "the separator must be one character, found \"" + separator + "\"");
      return nullptr;
    }
    settings->separator = separator[0];
    return settings;
  }

  std::unique_ptr<Decoder> MakeDecoder(const Config& config,
                                       const TopicInput& input) const override {
    return std::make_unique<PipeDecoder>(config,
                                         static_cast<const PipeSettings&>(*input.settings));
  }

 private:
  const std::string name_ = "pipe";
  const std::vector<std::string> keys_ = {"separator"};
};

// The built-in syntax and the pipe format.
const ConfigSyntax& WithPipe() {
  static const PipeFormat pipe;
  static const ConfigSyntax syntax = [] {
    ConfigSyntax with_pipe = BuiltinConfigSyntax();
    with_pipe.formats.push_back(&pipe);  // the registry line
    return with_pipe;
  }();
  return syntax;
}

constexpr char kHead[] = "source:\n  kafka:\n    brokers: b:9092\n    group: g\n    topics:\n";
constexpr char kTail[] =
    "store: {schema: lib}\nentities: [author, book]\nprojections:\n  authors: {from: author}\n";

// The config whose topics list is `topics` (from line 6 on), parsed with
// `syntax`; its errors go to *errors as ConfigError::ToString("t.yaml").
std::optional<Config> ParseTopics(const std::string& topics, const ConfigSyntax& syntax,
                                  std::vector<std::string>* errors) {
  std::vector<ConfigError> found;
  std::optional<Config> config = ParseConfig(kHead + topics + kTail, "t.yaml", syntax, &found);
  for (const ConfigError& error : found) errors->push_back(error.ToString("t.yaml"));
  return config;
}

const std::string kTopics =
    "      - native.events\n"
    "      - {topic: pipes, format: pipe, separator: ';'}\n"
    "      - {topic: '^pipes\\..*', format: pipe}\n";

TEST(ThirdFormat, ParsesWithItsOwnKey) {
  std::vector<std::string> errors;
  std::optional<Config> config = ParseTopics(kTopics, WithPipe(), &errors);
  EXPECT_EQ(std::vector<std::string>{}, errors);
  ASSERT_TRUE(config.has_value());
  const std::vector<TopicInput>& inputs = config->kafka->inputs;
  ASSERT_EQ(3u, inputs.size());
  EXPECT_EQ("native", inputs[0].format->name());
  EXPECT_EQ("pipe", inputs[1].format->name());
  EXPECT_EQ(';', static_cast<const PipeSettings&>(*inputs[1].settings).separator);
  EXPECT_EQ('|', static_cast<const PipeSettings&>(*inputs[2].settings).separator);
  // What the Kafka source asks of a topic's format.
  EXPECT_FALSE(FormatOf(inputs[1]).TopicsAppearLater());
}

TEST(ThirdFormat, IsUnknownWhereItIsNotRegistered) {
  std::vector<std::string> errors;
  EXPECT_FALSE(ParseTopics(kTopics, BuiltinConfigSyntax(), &errors).has_value());
  EXPECT_EQ((std::vector<std::string>{
                "t.yaml:7:32: source.kafka.topics[1].format: unknown format \"pipe\" (expected "
                "native or debezium)",
                "t.yaml:7:38: source.kafka.topics[1].separator: unknown key \"separator\"",
                "t.yaml:8:39: source.kafka.topics[2].format: unknown format \"pipe\" (expected "
                "native or debezium)"}),
            errors);
}

struct BadTopic {
  const char* name;  // the test's name: a pointer printed by default would change every run
  const char* topics;
  const char* error;  // ConfigError::ToString("t.yaml")
};

class ThirdFormatErrorTest : public ::testing::TestWithParam<BadTopic> {};

TEST_P(ThirdFormatErrorTest, IsReportedWithItsPlace) {
  std::vector<std::string> errors;
  EXPECT_FALSE(ParseTopics(GetParam().topics, WithPipe(), &errors).has_value());
  EXPECT_EQ(std::vector<std::string>{GetParam().error}, errors);
}

INSTANTIATE_TEST_SUITE_P(
    Errors, ThirdFormatErrorTest,
    ::testing::Values(
        BadTopic{"SeparatorOfTwoCharacters", "      - {topic: t, format: pipe, separator: '::'}\n",
                 "t.yaml:6:45: source.kafka.topics[0].separator: the separator must be one "
                 "character, found \"::\""},
        BadTopic{"SeparatorWithoutAFormat", "      - {topic: t, separator: ';'}\n",
                 "t.yaml:6:31: source.kafka.topics[0].separator: \"separator\" is only allowed "
                 "with format: pipe"},
        BadTopic{"SeparatorWithDebezium",
                 "      - {topic: t, format: debezium, entity: author, separator: ';'}\n",
                 "t.yaml:6:65: source.kafka.topics[0].separator: \"separator\" is only allowed "
                 "with format: pipe"},
        BadTopic{"EntityWithPipe", "      - {topic: t, format: pipe, entity: author}\n",
                 "t.yaml:6:42: source.kafka.topics[0].entity: \"entity\" is only allowed with "
                 "format: debezium"},
        BadTopic{"FormatMisspelt", "      - {topic: t, format: pip}\n",
                 "t.yaml:6:28: source.kafka.topics[0].format: unknown format \"pip\" (expected "
                 "native, debezium or pipe) (did you mean \"pipe\"?)"}),
    [](const ::testing::TestParamInfo<BadTopic>& info) { return std::string(info.param.name); });

RawRecord Record(const std::string& topic, const std::string& value) {
  RawRecord record;
  record.topic = topic;
  record.value = value;
  return record;
}

TEST(ThirdFormat, DecodesItsTopicsRecords) {
  std::vector<std::string> errors;
  std::optional<Config> config = ParseTopics(kTopics, WithPipe(), &errors);
  ASSERT_TRUE(config.has_value());
  const InputDecoder decoder(*config);
  const EventBatch batch = DecodeBatch(
      decoder, {Record("pipes", "author;a1;{\"name\": \"Ann\"}"), Record("pipes.x", "book|b1"),
                Record("pipes", "author|a1|{}"),  // ';' is this topic's separator
                Record("native.events",
                       R"({"type": "author", "id": "a2", "op": "upsert", "data": {}})")});
  ASSERT_EQ(3u, batch.events.size());
  ASSERT_EQ(1u, batch.dead_letters.size());
  EXPECT_EQ("expected TYPE|ID[|DATA]", batch.dead_letters[0].reason);
  const EntityEvent& upsert = batch.events[0].event;
  EXPECT_EQ(EventOp::kUpsert, upsert.op);
  EXPECT_EQ("a1", upsert.key.id);
  EXPECT_EQ("Ann", std::string((*upsert.data)["name"].GetString()));
  EXPECT_FALSE(upsert.version.has_value());
  EXPECT_EQ(EventOp::kDelete, batch.events[1].event.op);
  EXPECT_EQ("b1", batch.events[1].event.key.id);
  EXPECT_EQ("a2", batch.events[2].event.key.id);  // the native topic, as before
}

}  // namespace
}  // namespace denormd
