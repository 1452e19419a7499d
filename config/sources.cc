// The source section (config_sections.h): source.kafka, its topics (names
// or patterns) and each topic's input format, whose own keys the format reads
// through a YamlTopicReader (config/input_format_syntax.h).
#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "config/config_sections.h"

namespace denormd {
namespace config_internal {
namespace {

const KeyList kSourceKeys = {"kafka"};
const KeyList kKafkaKeys = {"brokers", "topics", "group", "dead_letter_topic", "properties"};

// The keys of a topic map: topic, format, then every format's own.
KeyList TopicKeys(const InputFormatSyntaxes& formats) {
  KeyList keys = {"topic", "format"};
  for (const InputFormatSyntax* format : formats) {
    for (const std::string& key : format->keys()) {
      if (!Contains(keys, key)) keys.push_back(key);
    }
  }
  return keys;
}

// The names of the formats, in their order.
KeyList FormatNames(const InputFormatSyntaxes& formats) {
  KeyList names;
  for (const InputFormatSyntax* format : formats) names.push_back(format->name());
  return names;
}

// The TopicReader a format parses its keys with: typed reads, each problem
// reported with its place.
class YamlTopicReader : public TopicReader {
 public:
  YamlTopicReader(ConfigReader* reader, const Item& item, std::map<std::string, Item> keys,
                  const TopicInput& input)
      : reader_(reader), keys_(reader, item, std::move(keys)), input_(input) {}

  const std::string& topic() const override { return input_.topic; }
  bool is_pattern() const override { return input_.IsPattern(); }
  bool Has(const std::string& key) const override { return keys_.Has(key); }
  bool ReadString(const std::string& key, std::string* out) override {
    const Item* item = keys_.Require(key);
    return item && reader_->ReadString(*item, out);
  }
  bool ReadEntityType(const std::string& key, std::string* out) override {
    const Item* item = keys_.Require(key);
    return item && reader_->ReadEntityType(*item, out);
  }
  bool ReadDistinctList(const std::string& key, const std::string& what,
                        std::vector<std::string>* out) override {
    const Item* item = keys_.Require(key);
    if (!item || !reader_->ReadStringList(*item, true, out)) return false;
    std::set<std::string> seen;
    for (const std::string& value : *out) {
      if (!seen.insert(value).second) {
        reader_->Error(*item, what + " " + Quote(value) + " is listed twice");
        return false;
      }
    }
    return true;
  }
  bool entity_types_known() const override { return reader_->entity_types_known(); }
  bool IsEntityType(const std::string& type) const override {
    return reader_->IsEntityType(type);
  }
  void Error(const std::string& key, const std::string& message) override {
    keys_.Error(key, message);
  }

 private:
  ConfigReader* reader_;
  MapKeys keys_;
  const TopicInput& input_;
};

// A topic entry: a name (the default format), or a map {topic, format, and
// the format's own keys}.
bool ReadTopic(ConfigReader& reader, const Item& item, TopicInput* out) {
  out->place = item.place;
  out->format = reader.formats().front();
  // A name (not a pattern) librdkafka could not subscribe to fails the start.
  const auto valid_name = [&reader](const Item& at, const std::string& topic) {
    if (topic.empty() || topic[0] == '^' || IsKafkaTopicName(topic)) return true;
    reader.Error(at, "topic " + Quote(topic) +
                         " is not a valid Kafka topic name (1 to 249 letters, digits, '.', '_', "
                         "'-'; a pattern starts with '^')");
    return false;
  };
  if (item.node.IsScalar()) {
    if (!reader.ReadNonEmptyString(item, &out->topic) || !valid_name(item, out->topic)) {
      return false;
    }
    // A name alone: the default format, none of its keys given.
    YamlTopicReader topic_reader(&reader, item, {}, *out);
    out->settings = out->format->Parse(topic_reader);
    return out->settings != nullptr;
  }
  if (!item.node.IsMap()) {
    reader.Error(item, "expected a topic name or a map with \"topic\" and \"format\", found " +
                           Describe(item.node));
    return false;
  }
  const auto keys = reader.ReadKeys(item, TopicKeys(reader.formats()));
  if (!reader.Require(item, keys, "topic") ||
      !reader.ReadNonEmptyString(keys.at("topic"), &out->topic) ||
      !valid_name(keys.at("topic"), out->topic)) {
    return false;
  }
  bool ok = true;
  if (out->IsPattern()) {
    try {
      std::regex pattern(out->topic, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      reader.Error(keys.at("topic"), "topic pattern " + Quote(out->topic) +
                                         " is not a valid regular expression: " + e.what());
      ok = false;
    }
  }
  std::string name;
  if (keys.count("format") && reader.ReadString(keys.at("format"), &name)) {
    const auto& formats = reader.formats();
    const auto named = std::find_if(formats.begin(), formats.end(), [&name](const auto* format) {
      return format->name() == name;
    });
    if (named == formats.end()) {
      const KeyList names = FormatNames(formats);
      reader.Error(keys.at("format"), "unknown format " + Quote(name) + " (expected " +
                                          JoinChoices(names) + ")" + Suggestion(name, names));
      return false;
    }
    out->format = *named;
  }
  // Keys of other formats: each named with the formats that allow it.
  for (const std::string& key : TopicKeys(reader.formats())) {
    if (key == "topic" || key == "format" || !keys.count(key) ||
        Contains(out->format->keys(), key)) {
      continue;
    }
    KeyList owners;
    for (const InputFormatSyntax* format : reader.formats()) {
      if (Contains(format->keys(), key)) owners.push_back(format->name());
    }
    reader.Error(keys.at(key), Quote(key) + " is only allowed with format: " + JoinChoices(owners));
    ok = false;
  }
  YamlTopicReader topic_reader(&reader, item, keys, *out);
  out->settings = out->format->Parse(topic_reader);
  return ok && out->settings != nullptr;
}

void ReadTopics(ConfigReader& reader, const Item& item, KafkaSourceConfig* out) {
  if (!item.node.IsSequence()) {
    reader.Error(item, "expected a list of topics, found " + Describe(item.node));
    return;
  }
  if (item.node.size() == 0) {
    reader.Error(item, "must not be an empty list");
    return;
  }
  std::map<std::string, size_t> first_index;
  for (size_t i = 0; i < item.node.size(); ++i) {
    const YAML::Node element = item.node[i];
    const Item element_item{element, item.where + "[" + std::to_string(i) + "]",
                            element.IsNull() ? item.place : PlaceOf(element)};
    TopicInput input;
    if (!ReadTopic(reader, element_item, &input)) continue;
    const auto [it, inserted] = first_index.emplace(input.topic, i);
    if (!inserted) {
      reader.Error(element_item, "duplicate topic " + Quote(input.topic) + " (also topics[" +
                                     std::to_string(it->second) + "])");
      continue;
    }
    out->topics.push_back(input.topic);
    out->inputs.push_back(std::move(input));
  }
}

}  // namespace

void ReadSource(ConfigReader& reader, const Item& item, Config* config) {
  if (!reader.ExpectMap(item)) return;
  const auto keys = reader.ReadKeys(item, kSourceKeys);
  const auto kafka_it = keys.find("kafka");
  if (kafka_it == keys.end()) return;
  const Item& kafka_item = kafka_it->second;
  if (!reader.ExpectMap(kafka_item)) return;
  const auto kafka = reader.ReadKeys(kafka_item, kKafkaKeys);
  KafkaSourceConfig out;
  if (reader.Require(kafka_item, kafka, "brokers")) {
    reader.ReadNonEmptyString(kafka.at("brokers"), &out.brokers);
  }
  if (reader.Require(kafka_item, kafka, "topics")) ReadTopics(reader, kafka.at("topics"), &out);
  if (reader.Require(kafka_item, kafka, "group") &&
      reader.ReadNonEmptyString(kafka.at("group"), &out.group) &&
      std::any_of(out.group.begin(), out.group.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    reader.Error(kafka.at("group"),
                 "the group must not contain control characters (a line break, a tab)");
  }
  if (kafka.count("dead_letter_topic") &&
      reader.ReadString(kafka.at("dead_letter_topic"), &out.dead_letter_topic) &&
      !out.dead_letter_topic.empty() && !IsKafkaTopicName(out.dead_letter_topic)) {
    reader.Error(kafka.at("dead_letter_topic"),
                 "topic " + Quote(out.dead_letter_topic) +
                     " is not a valid Kafka topic name (1 to 249 letters, digits, '.', '_', '-')");
  }
  if (kafka.count("properties")) {
    ReadKafkaProperties(reader, kafka.at("properties"), &out.properties);
  }
  config->kafka = std::move(out);
}

void ReadKafkaProperties(ConfigReader& reader, const Item& item,
                         std::vector<std::pair<std::string, std::string>>* out) {
  if (!reader.ExpectMap(item)) return;
  for (const Entry& entry : reader.Entries(item)) {
    if (!entry.value.node.IsScalar()) {
      reader.Error(entry.value, "a librdkafka property value must be a scalar, found " +
                                    Describe(entry.value.node));
      continue;
    }
    out->emplace_back(entry.key, entry.value.node.Scalar());
  }
}

}  // namespace config_internal
}  // namespace denormd
