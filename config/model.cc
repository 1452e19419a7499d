// The model's meaning, apart from its spelling (config.h): the canonical
// forms of expressions, selections and projections, NormalizedModel and its
// fingerprint, and ConfigChanges, which compares two configurations setting
// by setting.
#include <algorithm>
#include <cstdio>

#include "common/text.h"
#include "config/config.h"
#include "config/config_reader.h"

namespace denormd {

std::string NormalizedSelection(const Selection& selection) {
  std::string out;
  switch (selection.kind) {
    case Selection::Kind::kWhole:
      return "";
    case Selection::Kind::kList:
      for (const std::string& field : selection.fields) out += (out.empty() ? "" : ", ") + field;
      return "select [" + out + "]";
    case Selection::Kind::kMap:
      for (const auto& entry : selection.map) {
        out += (out.empty() ? "" : ", ") + entry.first + ": " + NormalizedExpression(entry.second);
      }
      return "select {" + out + "}";
  }
  return out;
}

std::string NormalizedOrderBy(const OrderBy& order_by) {
  if (!order_by.present) return "";
  return std::string("order_by ") + (order_by.descending ? "-" : "") + order_by.path.text;
}

std::string NormalizedExpression(const Expression& expression) {
  switch (expression.kind) {
    case Expression::Kind::kPath:
      return expression.path.text;
    case Expression::Kind::kTemplate: {
      std::string quoted;
      config_internal::AppendJsonString(expression.template_.text, &quoted);
      return quoted;
    }
    case Expression::Kind::kValue:
      return "{value: " + expression.value_json + "}";
    case Expression::Kind::kDerived:
      return expression.spec ? expression.spec->Normalized() : expression.derivation;
  }
  return "";
}

namespace {

std::string JoinList(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return "[" + out + "]";
}

// A projection in one canonical line: equal for equal meaning, whatever its
// place in the file or the spelling of its derivations.
std::string NormalizedProjection(const ProjectionConfig& p) {
  std::string out = "collection " + p.collection;
  if (p.kind == ProjectionConfig::Kind::kEntity) {
    out += " from " + p.from;
    if (p.has_include) out += " include " + JoinList(p.include);
    out += " exclude " + JoinList(p.exclude) + " partition_key " + p.partition_key + " fields {";
    for (const auto& field : p.fields) out += field.first + ": " + NormalizedExpression(field.second) + "; ";
    return out + "}";
  }
  const bool stable = p.layout == ProjectionConfig::BucketLayout::kStable;
  return out + " buckets " + p.buckets + " by " + p.by.text + " size " + std::to_string(p.size) +
         " " + NormalizedOrderBy(p.order_by) + " field " + p.field + " " +
         NormalizedSelection(p.select) + " layout " + (stable ? "stable" : "packed");
}

std::string NormalizedProperties(const std::vector<std::pair<std::string, std::string>>& properties) {
  std::string out;
  for (const auto& property : properties) out += property.first + "=" + property.second + "\n";
  return out;
}

// How one topic's records are read: its format and the format's settings.
std::string NormalizedInput(const TopicInput& input) {
  return (input.format ? input.format->name() : "") + " " +
         (input.settings ? input.settings->Normalized() : "");
}

}  // namespace

std::vector<std::string> ConfigChanges(const Config& before, const Config& after) {
  std::vector<std::string> changed;
  const auto compare = [&changed](const char* name, const auto& a, const auto& b) {
    if (!(a == b)) changed.push_back(name);
  };
  if (before.kafka.has_value() != after.kafka.has_value()) {
    changed.push_back("source.kafka");
  } else if (before.kafka) {
    const KafkaSourceConfig& a = *before.kafka;
    const KafkaSourceConfig& b = *after.kafka;
    compare("source.kafka.brokers", a.brokers, b.brokers);
    compare("source.kafka.topics", a.topics, b.topics);
    compare("source.kafka.group", a.group, b.group);
    compare("source.kafka.dead_letter_topic", a.dead_letter_topic, b.dead_letter_topic);
    compare("source.kafka.properties", NormalizedProperties(a.properties),
            NormalizedProperties(b.properties));
    // Each topic's input (its format and the format's settings), by topic,
    // for the topics both name.
    for (const TopicInput& input : b.inputs) {
      for (const TopicInput& old : a.inputs) {
        if (old.topic == input.topic && NormalizedInput(old) != NormalizedInput(input)) {
          changed.push_back("source.kafka.topics." + input.topic);
        }
      }
    }
  }
  compare("store.postgres", before.store.postgres, after.store.postgres);
  compare("store.schema", before.store.schema, after.store.schema);
  compare("store.connect_timeout_s", before.store.connect_timeout_s, after.store.connect_timeout_s);
  compare("store.statement_timeout_ms", before.store.statement_timeout_ms,
          after.store.statement_timeout_ms);
  compare("store.lock_timeout_ms", before.store.lock_timeout_ms, after.store.lock_timeout_ms);
  compare("batch.max_events", before.batch.max_events, after.batch.max_events);
  compare("batch.max_delay_ms", before.batch.max_delay_ms, after.batch.max_delay_ms);
  compare("batch.max_event_bytes", before.batch.max_event_bytes, after.batch.max_event_bytes);
  compare("batch.stuck_after_s", before.batch.stuck_after_s, after.batch.stuck_after_s);
  compare("batch.max_lanes", before.batch.max_lanes, after.batch.max_lanes);
  compare("retention.tombstone_hours", before.retention.tombstone_hours,
          after.retention.tombstone_hours);
  compare("retention.dead_letter_days", before.retention.dead_letter_days,
          after.retention.dead_letter_days);
  compare("retention.max_dead_letters", before.retention.max_dead_letters,
          after.retention.max_dead_letters);
  compare("retention.interval_s", before.retention.interval_s, after.retention.interval_s);
  compare("limits.max_members", before.limits.max_members, after.limits.max_members);
  compare("limits.fanout_warn", before.limits.fanout_warn, after.limits.fanout_warn);
  compare("limits.max_document_bytes", before.limits.max_document_bytes,
          after.limits.max_document_bytes);
  compare("limits.max_bucket_pages", before.limits.max_bucket_pages,
          after.limits.max_bucket_pages);
  if (before.feed.has_value() != after.feed.has_value()) {
    changed.push_back("feed");
  } else if (before.feed) {
    const FeedConfig& a = *before.feed;
    const FeedConfig& b = *after.feed;
    compare("feed.brokers", a.brokers, b.brokers);
    compare("feed.topic", a.topic, b.topic);
    compare("feed.collections", a.collections, b.collections);
    compare("feed.transactional_id", a.transactional_id, b.transactional_id);
    compare("feed.progress_topic", a.progress_topic, b.progress_topic);
    compare("feed.max_messages", a.max_messages, b.max_messages);
    compare("feed.max_message_bytes", a.max_message_bytes, b.max_message_bytes);
    compare("feed.poll_ms", a.poll_ms, b.poll_ms);
    compare("feed.properties", NormalizedProperties(a.properties), NormalizedProperties(b.properties));
  }
  compare("log.level", before.log.level, after.log.level);
  compare("log.format", before.log.format, after.log.format);
  compare("entities", before.entities, after.entities);
  // Projections in the order of `after`, then those `after` dropped.
  for (const ProjectionConfig& projection : after.projections) {
    const ProjectionConfig* old = before.FindProjection(projection.name);
    if (old == nullptr || NormalizedProjection(*old) != NormalizedProjection(projection)) {
      changed.push_back("projections." + projection.name);
    }
  }
  for (const ProjectionConfig& projection : before.projections) {
    if (after.FindProjection(projection.name) == nullptr) {
      changed.push_back("projections." + projection.name);
    }
  }
  return changed;
}

std::string NormalizedProjectionText(const ProjectionConfig& projection) {
  return NormalizedProjection(projection);
}

std::string NormalizedModel(const Config& config) {
  std::vector<std::string> entities = config.entities;
  std::sort(entities.begin(), entities.end());
  std::string out = "entities " + JoinList(entities) + "\n";
  std::vector<const ProjectionConfig*> projections;
  for (const ProjectionConfig& projection : config.projections) projections.push_back(&projection);
  std::sort(projections.begin(), projections.end(),
            [](const ProjectionConfig* a, const ProjectionConfig* b) { return a->name < b->name; });
  for (const ProjectionConfig* projection : projections) {
    out += "projection " + projection->name + ": " + NormalizedProjection(*projection) + "\n";
  }
  return out;
}

std::string ModelFingerprint(const Config& config) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(Fnv1a64(NormalizedModel(config))));
  return text;
}

}  // namespace denormd
