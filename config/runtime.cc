// The run-time sections (config_sections.h): store, batch, feed, retention,
// limits and log: how denormd connects, batches, publishes, prunes, advises
// and logs, as opposed to the model it maintains.
#include <algorithm>

#include "config/config_sections.h"

namespace denormd {
namespace config_internal {
namespace {

const KeyList kStoreKeys = {"postgres", "schema", "connect_timeout_s", "statement_timeout_ms",
                            "lock_timeout_ms"};
const KeyList kFeedKeys = {"brokers",      "topic",          "collections",       "transactional_id",
                           "progress_topic", "max_messages", "max_message_bytes", "poll_ms",
                           "properties"};
const KeyList kBatchKeys = {"max_events", "max_delay_ms", "max_event_bytes", "stuck_after_s",
                          "max_lanes"};
const KeyList kRetentionKeys = {"tombstone_hours", "dead_letter_days", "max_dead_letters",
                                "interval_s"};
const KeyList kLimitsKeys = {"max_members", "fanout_warn", "max_document_bytes",
                              "max_bucket_pages"};
const KeyList kLogKeys = {"level", "format"};
// Upper bounds of the numbers `check` accepts: past them a value fails or
// misbehaves at run time (docs/architecture.md, "Limits and bad input").
constexpr uint64_t kMaxConnectTimeoutS = 3600;
constexpr uint64_t kMaxPostgresMs = 2147483647;  // PostgreSQL's timeouts are int milliseconds
constexpr uint64_t kMaxBatchEvents = 1000000;
constexpr uint64_t kMaxEventBytes = 256u << 20;
constexpr uint64_t kMaxDelayMs = 60000;
constexpr uint64_t kMaxDayS = 86400;
constexpr uint64_t kMaxLanes = 64;
constexpr uint64_t kMaxFeedMessages = 1000000;
constexpr uint64_t kMaxMessageBytes = 1000000000;
constexpr uint64_t kMaxRetentionDays = 36500;
constexpr uint64_t kMaxRows = 9223372036854775807ull;

// Where the feed section and its collections' keys were written, for the
// checks made once the whole file is read.
struct FeedPlaces {
  Item section;
  std::vector<std::pair<ConfigPlace, std::string>> collections;  // place and where, by index
};

bool ReadFeedTopic(ConfigReader& reader, const Item& item, std::string* out) {
  if (!reader.ReadNonEmptyString(item, out)) return false;
  if (IsKafkaTopicName(*out)) return true;
  reader.Error(item, "topic " + Quote(*out) +
                         " is not a valid Kafka topic name (1 to 249 letters, digits, '.', '_', "
                         "'-')");
  return false;
}

void ReadFeedKeys(ConfigReader& reader, const Item& item, Config* config, FeedPlaces* places) {
  if (!reader.ExpectMap(item)) return;
  const auto keys = reader.ReadKeys(item, kFeedKeys);
  FeedConfig feed;
  if (keys.count("brokers")) reader.ReadNonEmptyString(keys.at("brokers"), &feed.brokers);
  if (keys.count("topic")) ReadFeedTopic(reader, keys.at("topic"), &feed.topic);
  if (keys.count("collections") && reader.ExpectMap(keys.at("collections"))) {
    for (const Entry& entry : reader.Entries(keys.at("collections"))) {
      std::string topic;
      if (!ReadFeedTopic(reader, entry.value, &topic)) continue;
      feed.collections.emplace_back(entry.key, topic);
      places->collections.emplace_back(entry.key_place, entry.value.where);
    }
  }
  if (!keys.count("topic") && !keys.count("collections")) {
    reader.Error(item,
                 "give \"topic\" (every collection), \"collections\" (collection: topic) or both");
  }
  // The relay's Kafka transactional.id and the key of its progress records;
  // the default progress topic is derived from it.
  if (keys.count("transactional_id") &&
      reader.ReadNonEmptyString(keys.at("transactional_id"), &feed.transactional_id)) {
    if (!IsKafkaTopicName(feed.transactional_id)) {
      reader.Error(keys.at("transactional_id"),
                   "transactional_id " + Quote(feed.transactional_id) +
                       " must be 1 to 249 letters, digits, '.', '_', '-' (it names the relay in "
                       "Kafka and its progress topic)");
    } else if (!keys.count("progress_topic") &&
               !IsKafkaTopicName(feed.transactional_id + ".progress")) {
      reader.Error(keys.at("transactional_id"),
                   "transactional_id is too long to derive the progress topic "
                   "\"<transactional_id>.progress\" (249 characters at most): shorten it, or set "
                   "progress_topic");
    }
  }
  if (keys.count("progress_topic")) {
    ReadFeedTopic(reader, keys.at("progress_topic"), &feed.progress_topic);
  }
  if (keys.count("max_messages")) {
    reader.ReadBoundedUint(keys.at("max_messages"), 1, kMaxFeedMessages,
                           "one Kafka transaction held in memory", &feed.max_messages);
  }
  if (keys.count("max_message_bytes")) {
    reader.ReadBoundedUint(keys.at("max_message_bytes"), 1024, kMaxMessageBytes,
                           "librdkafka's largest message.max.bytes", &feed.max_message_bytes);
  }
  if (keys.count("poll_ms")) {
    reader.ReadBoundedUint(keys.at("poll_ms"), 1, kMaxDelayMs, "a minute", &feed.poll_ms);
  }
  if (keys.count("properties")) {
    ReadKafkaProperties(reader, keys.at("properties"), &feed.properties);
  }
  places->section = item;
  config->feed = std::move(feed);
}

// What the feed section can only be checked against, and its defaults,
// once the whole file is read.
void CheckFeed(ConfigReader& reader, const FeedPlaces& places, Config* config) {
  FeedConfig& feed = *config->feed;
  const std::vector<std::string> known = config->CollectionNames();
  for (size_t i = 0; i < feed.collections.size(); ++i) {
    const std::string& collection = feed.collections[i].first;
    const auto& place = places.collections[i];
    if (!std::binary_search(known.begin(), known.end(), collection) &&
        !config->projections.empty()) {
      reader.Error(place.first, place.second,
                   "unknown collection " + Quote(collection) + " (collections: " +
                       JoinKeys(known) + ")" + Suggestion(collection, known));
    }
  }
  if (feed.brokers.empty()) {
    if (config->kafka) {
      feed.brokers = config->kafka->brokers;
    } else {
      reader.Error(places.section, "missing required key \"brokers\" (there is no source.kafka "
                                   "to take them from)");
    }
  }
  if (feed.transactional_id.empty() && !config->store.schema.empty()) {
    feed.transactional_id = "denormd-feed-" + config->store.schema;
  }
  if (feed.progress_topic.empty()) feed.progress_topic = feed.transactional_id + ".progress";
  for (const auto& entry : feed.collections) {
    if (entry.second == feed.progress_topic) {
      reader.Error(places.section, "the progress topic " + Quote(feed.progress_topic) +
                                       " cannot also carry documents");
    }
  }
  if (!feed.topic.empty() && feed.topic == feed.progress_topic) {
    reader.Error(places.section, "the progress topic " + Quote(feed.progress_topic) +
                                     " cannot also carry documents");
  }
}

}  // namespace

void ReadStore(ConfigReader& reader, const Item& item, Config* config) {
  if (!reader.ExpectMap(item)) return;
  const auto keys = reader.ReadKeys(item, kStoreKeys);
  if (keys.count("postgres")) reader.ReadString(keys.at("postgres"), &config->store.postgres);
  if (reader.Require(item, keys, "schema") &&
      reader.ReadString(keys.at("schema"), &config->store.schema)) {
    reader.ReadSqlName(keys.at("schema"), "schema", config->store.schema, false);
  }
  if (keys.count("connect_timeout_s")) {
    reader.ReadBoundedUint(keys.at("connect_timeout_s"), 1, kMaxConnectTimeoutS, "an hour",
                           &config->store.connect_timeout_s);
  }
  if (keys.count("statement_timeout_ms")) {
    reader.ReadBoundedUint(keys.at("statement_timeout_ms"), 0, kMaxPostgresMs,
                           "PostgreSQL's largest timeout", &config->store.statement_timeout_ms);
  }
  if (keys.count("lock_timeout_ms")) {
    reader.ReadBoundedUint(keys.at("lock_timeout_ms"), 0, kMaxPostgresMs,
                           "PostgreSQL's largest timeout", &config->store.lock_timeout_ms);
  }
}

void ReadBatch(ConfigReader& reader, const Item& item, Config* config) {
  if (!reader.ExpectMap(item)) return;
  const auto keys = reader.ReadKeys(item, kBatchKeys);
  if (keys.count("max_events")) {
    reader.ReadBoundedUint(keys.at("max_events"), 1, kMaxBatchEvents,
                           "a batch is one transaction held in memory", &config->batch.max_events);
  }
  if (keys.count("max_event_bytes")) {
    reader.ReadBoundedUint(keys.at("max_event_bytes"), 1024, kMaxEventBytes,
                           "256 MiB: PostgreSQL's jsonb holds less",
                           &config->batch.max_event_bytes);
  }
  if (keys.count("max_delay_ms")) {
    reader.ReadBoundedUint(keys.at("max_delay_ms"), 0, kMaxDelayMs, "a minute",
                           &config->batch.max_delay_ms);
  }
  if (keys.count("stuck_after_s")) {
    reader.ReadBoundedUint(keys.at("stuck_after_s"), 1, kMaxDayS, "a day",
                           &config->batch.stuck_after_s);
  }
  if (keys.count("max_lanes")) {
    reader.ReadBoundedUint(keys.at("max_lanes"), 1, kMaxLanes,
                           "each lane holds a PostgreSQL connection", &config->batch.max_lanes);
  }
}

void ReadFeed(ConfigReader& reader, const Item& item, Config* config) {
  FeedPlaces places;
  ReadFeedKeys(reader, item, config, &places);
  // Not a map (reported): there is no feed to check.
  if (config->feed) CheckFeed(reader, places, config);
}

void ReadRetention(ConfigReader& reader, const Item& item, Config* config) {
  if (!reader.ExpectMap(item)) return;
  const auto keys = reader.ReadKeys(item, kRetentionKeys);
  RetentionConfig& out = config->retention;
  if (keys.count("tombstone_hours")) {
    reader.ReadBoundedUint(keys.at("tombstone_hours"), 0, kMaxRetentionDays * 24, "100 years",
                           &out.tombstone_hours);
  }
  if (keys.count("dead_letter_days")) {
    reader.ReadBoundedUint(keys.at("dead_letter_days"), 0, kMaxRetentionDays, "100 years",
                           &out.dead_letter_days);
  }
  if (keys.count("max_dead_letters")) {
    reader.ReadBoundedUint(keys.at("max_dead_letters"), 0, kMaxRows, "PostgreSQL's bigint",
                           &out.max_dead_letters);
  }
  if (keys.count("interval_s")) {
    reader.ReadBoundedUint(keys.at("interval_s"), 0, kMaxDayS * 365, "a year", &out.interval_s);
  }
}

void ReadLimits(ConfigReader& reader, const Item& item, Config* config) {
  if (!reader.ExpectMap(item)) return;
  const auto keys = reader.ReadKeys(item, kLimitsKeys);
  LimitsConfig& out = config->limits;
  if (keys.count("max_members")) {
    reader.ReadBoundedUint(keys.at("max_members"), 1, kMaxRows, "PostgreSQL's bigint",
                           &out.max_members);
  }
  if (keys.count("fanout_warn")) {
    reader.ReadBoundedUint(keys.at("fanout_warn"), 1, kMaxRows, "PostgreSQL's bigint",
                           &out.fanout_warn);
  }
  if (keys.count("max_document_bytes")) {
    reader.ReadBoundedUint(keys.at("max_document_bytes"), 1, kMaxMessageBytes, "1 GB",
                           &out.max_document_bytes);
  }
  if (keys.count("max_bucket_pages")) {
    reader.ReadBoundedUint(keys.at("max_bucket_pages"), 1, kMaxRows, "PostgreSQL's bigint",
                           &out.max_bucket_pages);
  }
}

void ReadLog(ConfigReader& reader, const Item& item, Config* config) {
  if (!reader.ExpectMap(item)) return;
  const auto keys = reader.ReadKeys(item, kLogKeys);
  std::string text;
  if (keys.count("level") && reader.ReadString(keys.at("level"), &text) &&
      !ParseLogLevel(text, &config->log.level)) {
    reader.Error(keys.at("level"),
                 "level must be debug, info, warn or error, found " + Quote(text));
  }
  if (keys.count("format") && reader.ReadString(keys.at("format"), &text) &&
      !ParseLogFormat(text, &config->log.format)) {
    reader.Error(keys.at("format"), "format must be text or json, found " + Quote(text));
  }
}

}  // namespace config_internal
}  // namespace denormd
