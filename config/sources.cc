// The source section (config_sections.h): source.kafka, its topics (names
// or patterns) and each topic's input format with the Debezium settings.
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
const KeyList kTopicKeys = {"topic", "format", "entity", "id_columns", "json_columns"};
const KeyList kDebeziumOnlyKeys = {"entity", "id_columns", "json_columns"};

// A non-empty list of distinct column names.
bool ReadColumnList(ConfigReader& reader, const Item& item, std::vector<std::string>* out) {
  if (!reader.ReadStringList(item, true, out)) return false;
  std::set<std::string> seen;
  for (size_t i = 0; i < out->size(); ++i) {
    if (!seen.insert((*out)[i]).second) {
      reader.Error(item, "column " + Quote((*out)[i]) + " is listed twice");
      return false;
    }
  }
  return true;
}

// A topic entry: a name (the native format), or a map
// {topic, format, entity, id_columns, json_columns}.
bool ReadTopic(ConfigReader& reader, const Item& item, TopicInput* out) {
  out->place = item.place;
  // A name (not a pattern) librdkafka could not subscribe to fails the start.
  const auto valid_name = [&reader](const Item& at, const std::string& topic) {
    if (topic.empty() || topic[0] == '^' || IsKafkaTopicName(topic)) return true;
    reader.Error(at, "topic " + Quote(topic) +
                         " is not a valid Kafka topic name (1 to 249 letters, digits, '.', '_', "
                         "'-'; a pattern starts with '^')");
    return false;
  };
  if (item.node.IsScalar()) {
    return reader.ReadNonEmptyString(item, &out->topic) && valid_name(item, out->topic);
  }
  if (!item.node.IsMap()) {
    reader.Error(item, "expected a topic name or a map with \"topic\" and \"format\", found " +
                           Describe(item.node));
    return false;
  }
  const auto keys = reader.ReadKeys(item, kTopicKeys);
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
  std::string format = "native";
  if (keys.count("format") && reader.ReadString(keys.at("format"), &format)) {
    if (format == "debezium") {
      out->format = InputFormat::kDebezium;
    } else if (format != "native") {
      reader.Error(keys.at("format"), "unknown format " + Quote(format) +
                                          " (expected native or debezium)" +
                                          Suggestion(format, {"native", "debezium"}));
      return false;
    }
  }
  if (out->format != InputFormat::kDebezium) {
    for (const std::string& key : kDebeziumOnlyKeys) {
      if (keys.count(key)) {
        reader.Error(keys.at(key), Quote(key) + " is only allowed with format: debezium");
        ok = false;
      }
    }
    return ok;
  }
  if (keys.count("entity")) {
    ok = reader.ReadEntityType(keys.at("entity"), &out->entity) && ok;
  } else if (!out->IsPattern() && reader.entity_types_known()) {
    const size_t dot = out->topic.rfind('.');
    const std::string table = dot == std::string::npos ? out->topic : out->topic.substr(dot + 1);
    if (!reader.IsEntityType(table)) {
      reader.Error(keys.at("topic"), "topic " + Quote(out->topic) + " maps to the entity type " +
                                         Quote(table) +
                                         " (its table name), which is not in entities; add it "
                                         "there or name the type with \"entity\"");
      ok = false;
    }
  }
  if (keys.count("id_columns")) {
    ok = ReadColumnList(reader, keys.at("id_columns"), &out->id_columns) && ok;
  }
  if (keys.count("json_columns")) {
    ok = ReadColumnList(reader, keys.at("json_columns"), &out->json_columns) && ok;
  }
  return ok;
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
