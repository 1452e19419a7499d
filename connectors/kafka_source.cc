#include "connectors/kafka_source.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <set>
#include <thread>

#include <librdkafka/rdkafkacpp.h>

#include "common/log.h"
#include "common/retry.h"
#include "connectors/kafka_client.h"
#include "formats/format_registry.h"

namespace denormd {

std::string KafkaStreamSource(const KafkaSourceConfig& kafka, const std::string& topic) {
  return "kafka:" + kafka.group + ":" + topic;
}


class KafkaEventSource::Rebalancer : public RdKafka::RebalanceCb {
 public:
  explicit Rebalancer(KafkaEventSource* source) : source_(source) {}
  void rebalance_cb(RdKafka::KafkaConsumer* consumer, RdKafka::ErrorCode err,
                    std::vector<RdKafka::TopicPartition*>& partitions) override {
    if (source_->rebalance_hook_) source_->rebalance_hook_();
    source_->generation_++;
    std::vector<TopicPartition> list;
    for (const RdKafka::TopicPartition* p : partitions) list.emplace_back(p->topic(), p->partition());
    if (err == RdKafka::ERR__ASSIGN_PARTITIONS) {
      Status status = source_->AssignFromStore(list);
      if (!status.ok()) {
        Log(LogLevel::kError, "assign_failed", {{"error", status.message()}});
        consumer->unassign();
      }
      return;
    }
    std::string names;
    for (const auto& tp : list) {
      names += (names.empty() ? "" : ",") + tp.first + "/" + std::to_string(tp.second);
      source_->progress_.erase(tp);
    }
    Log(LogLevel::kInfo, "partitions_revoked", {{"partitions", names}});
    consumer->unassign();
  }
  KafkaLogger logger;
  DeliveryCounter deliveries;

 private:
  KafkaEventSource* source_;
};

std::vector<std::pair<std::string, std::string>> ConsumerReadAhead(const BatchConfig& batch) {
  return {{"queued.min.messages", std::to_string(std::max<uint64_t>(1000, 2 * batch.max_events))},
          {"queued.max.messages.kbytes", "16384"}};
}

KafkaEventSource::KafkaEventSource(const Config& config, Lanes lanes, PositionLoader loader,
                                   const std::atomic<bool>* stopping)
    : config_(config),
      lanes_(std::move(lanes)),
      loader_(std::move(loader)),
      stopping_(stopping),
      max_event_bytes_(config.batch.max_event_bytes) {}

KafkaEventSource::~KafkaEventSource() { Close(); }

Status KafkaEventSource::Open() {
  const KafkaSourceConfig& kafka = *config_.kafka;
  rebalancer_ = std::make_unique<Rebalancer>(this);
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  DENORMD_RETURN_IF_ERROR(SetBaseKafkaProperties(kafka, conf.get()));
  DENORMD_RETURN_IF_ERROR(SetKafkaProperties(conf.get(), {{"group.id", kafka.group},
                                              // Offsets live in PostgreSQL, never in Kafka.
                                              {"enable.auto.commit", "false"},
                                              {"enable.auto.offset.store", "false"},
                                              {"auto.offset.reset", "earliest"},
                                              {"enable.partition.eof", "false"}}));
  std::string error;
  if (conf->set("rebalance_cb", rebalancer_.get(), error) != RdKafka::Conf::CONF_OK ||
      conf->set("event_cb", static_cast<RdKafka::EventCb*>(&rebalancer_->logger), error) !=
          RdKafka::Conf::CONF_OK) {
    return Status::Fatal("librdkafka: " + error);
  }
  // A pattern matches topics created later, and some formats' topics are
  // created after the subscription (Debezium's: Kafka Connect creates a
  // table's topic when the table gets its first row). librdkafka notices new
  // topics at its metadata refresh, every 5 minutes by default: every 5
  // seconds here (properties may override it).
  const bool later_topics =
      std::any_of(kafka.inputs.begin(), kafka.inputs.end(), [](const TopicInput& input) {
        return input.IsPattern() || FormatOf(input).TopicsAppearLater();
      });
  if (later_topics) {
    DENORMD_RETURN_IF_ERROR(
        SetKafkaProperties(conf.get(), {{"topic.metadata.refresh.interval.ms", "5000"}}));
  }
  DENORMD_RETURN_IF_ERROR(SetKafkaProperties(conf.get(), ConsumerReadAhead(config_.batch)));
  DENORMD_RETURN_IF_ERROR(SetUserKafkaProperties(kafka, conf.get()));
  consumer_.reset(RdKafka::KafkaConsumer::create(conf.get(), error));
  if (!consumer_) return Status::InvalidInput("cannot create the Kafka consumer: " + error);
  RdKafka::ErrorCode err = consumer_->subscribe(kafka.topics);
  if (err != RdKafka::ERR_NO_ERROR) {
    return Status::Fatal("cannot subscribe to the topics: " + RdKafka::err2str(err));
  }
  if (!kafka.dead_letter_topic.empty()) {
    std::unique_ptr<RdKafka::Conf> pconf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
    DENORMD_RETURN_IF_ERROR(SetBaseKafkaProperties(kafka, pconf.get()));
    DENORMD_RETURN_IF_ERROR(SetKafkaProperties(pconf.get(), {{"enable.idempotence", "true"}}));
    DENORMD_RETURN_IF_ERROR(SetUserKafkaProperties(kafka, pconf.get()));
    if (pconf->set("event_cb", static_cast<RdKafka::EventCb*>(&rebalancer_->logger), error) !=
            RdKafka::Conf::CONF_OK ||
        pconf->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(&rebalancer_->deliveries),
                   error) != RdKafka::Conf::CONF_OK) {
      return Status::Fatal("librdkafka: " + error);
    }
    dead_letter_producer_.reset(RdKafka::Producer::create(pconf.get(), error));
    if (!dead_letter_producer_) {
      return Status::InvalidInput("cannot create the dead-letter producer: " + error);
    }
  }
  Log(LogLevel::kInfo, "kafka_subscribed",
      {{"brokers", kafka.brokers}, {"group", kafka.group}, {"topics", [&] {
         std::string t;
         for (const std::string& topic : kafka.topics) t += (t.empty() ? "" : ",") + topic;
         return t;
       }()}});
  return Status::Ok();
}

Status KafkaEventSource::LoadStoredPositions(const std::vector<TopicPartition>& partitions,
                                             std::map<TopicPartition, StreamProgress>* out) {
  std::map<std::string, std::vector<int32_t>> by_topic;
  for (const TopicPartition& tp : partitions) by_topic[tp.first].push_back(tp.second);
  for (const auto& topic : by_topic) {
    std::map<int32_t, StreamProgress> progress;
    DENORMD_RETURN_IF_ERROR(
        loader_(KafkaStreamSource(*config_.kafka, topic.first), topic.second, lanes_, &progress));
    for (auto& entry : progress) (*out)[{topic.first, entry.first}] = std::move(entry.second);
  }
  return Status::Ok();
}

Status KafkaEventSource::AssignFromStore(std::vector<TopicPartition> partitions) {
  std::map<TopicPartition, StreamProgress> stored;
  // The store may be down right now; consuming without positions is not an
  // option, so wait for it (or for a stop).
  for (int attempt = 1;; ++attempt) {
    stored.clear();
    Status status = LoadStoredPositions(partitions, &stored);
    if (status.ok()) break;
    if (stopping_->load()) return Status::Transient("stopping while loading positions");
    Log(LogLevel::kWarn, "positions_unavailable",
        {{"attempt", attempt}, {"error", status.message()}});
    std::this_thread::sleep_for(std::chrono::milliseconds(RetryBackoffMs(attempt)));
  }
  std::vector<RdKafka::TopicPartition*> assignment;
  std::string names;
  for (const TopicPartition& tp : partitions) {
    const StreamProgress& progress = progress_[tp] = stored[tp];
    const int64_t after = lanes_.ResumeAfter(progress);
    const int64_t next = after < 0 ? RdKafka::Topic::OFFSET_BEGINNING : after + 1;
    assignment.push_back(RdKafka::TopicPartition::create(tp.first, tp.second, next));
    names += (names.empty() ? "" : ",") + tp.first + "/" + std::to_string(tp.second) + "@" +
             (after < 0 ? std::string("beginning") : std::to_string(next));
  }
  RdKafka::ErrorCode err = consumer_->assign(assignment);
  RdKafka::TopicPartition::destroy(assignment);
  if (err != RdKafka::ERR_NO_ERROR) return Status::Fatal("assign: " + RdKafka::err2str(err));
  Log(LogLevel::kInfo, "partitions_assigned", {{"partitions", names}});
  return Status::Ok();
}

Status KafkaEventSource::Poll(size_t max, int max_delay_ms, int idle_ms,
                              std::vector<RawRecord>* out) {
  using Clock = std::chrono::steady_clock;
  uint64_t generation = generation_;
  Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(idle_ms);
  bool first = true;
  while (out->size() < max && !stopping_->load()) {
    int remaining = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (remaining <= 0) break;
    // Once a batch has a record it takes only what is already here: an idle
    // input never makes a batch wait out max_delay_ms.
    std::unique_ptr<RdKafka::Message> message(consumer_->consume(first ? std::min(remaining, 100) : 0));
    if (generation_ != generation) {
      // A rebalance ran inside consume(). Events read before it may belong to
      // partitions this instance no longer owns, and every partition it owns
      // now restarts at its stored position: drop them. The message this
      // call returned already comes from the new assignment, so it is kept.
      generation = generation_;
      out->clear();
      first = true;
      deadline = Clock::now() + std::chrono::milliseconds(idle_ms);
    }
    switch (message->err()) {
      case RdKafka::ERR_NO_ERROR: {
        rebalancer_->logger.Reset();
        out->push_back(ToRecord(*message));
        if (first) {
          first = false;
          deadline = Clock::now() + std::chrono::milliseconds(max_delay_ms);
        }
        break;
      }
      case RdKafka::ERR__TIMED_OUT:
      case RdKafka::ERR__PARTITION_EOF:
        if (!first) return Status::Ok();  // nothing more ready: apply what we have
        break;
      case RdKafka::ERR__FATAL:
        return Status::Fatal("Kafka consumer: " + message->errstr());
      default:
        // Transport errors, unknown topics while they are created, ...:
        // librdkafka retries on its own; the event callback logs them.
        break;
    }
  }
  return Status::Ok();
}

RawRecord KafkaEventSource::ToRecord(RdKafka::Message& message) const {
  RawRecord record;
  record.topic = message.topic_name();
  record.at.source = KafkaStreamSource(*config_.kafka, record.topic);
  record.at.partition = message.partition();
  record.at.position = message.offset();
  RdKafka::MessageTimestamp timestamp = message.timestamp();
  if (timestamp.type != RdKafka::MessageTimestamp::MSG_TIMESTAMP_NOT_AVAILABLE) {
    record.timestamp_ms = timestamp.timestamp;
  }
  if (message.key_pointer() != nullptr) {
    record.key.emplace(static_cast<const char*>(message.key_pointer()), message.key_len());
  }
  if (message.payload() != nullptr) {
    const uint64_t limit = max_event_bytes_;
    if (message.len() > limit) {
      record.refusal = TooLargeRefusal(message.len(), limit);
      record.value.emplace(static_cast<const char*>(message.payload()), kRefusedRecordBytes);
    } else {
      record.value.emplace(static_cast<const char*>(message.payload()), message.len());
    }
  }
  if (RdKafka::Headers* headers = message.headers()) {
    for (const RdKafka::Headers::Header& header : headers->get_all()) {
      record.headers.emplace_back(
          header.key(), header.value() == nullptr
                            ? std::string()
                            : std::string(static_cast<const char*>(header.value()),
                                          header.value_size()));
    }
  }
  return record;
}

bool KafkaEventSource::Applied(const SourcePosition& at, const std::string& type) const {
  const std::string prefix = KafkaStreamSource(*config_.kafka, "");
  if (at.source.compare(0, prefix.size(), prefix) != 0) return false;
  auto it = progress_.find({at.source.substr(prefix.size()), at.partition});
  return it != progress_.end() && at.position <= it->second.AppliedThrough(type);
}

std::vector<SourcePosition> KafkaEventSource::FencingPositions(size_t lane) const {
  std::vector<SourcePosition> out;
  for (const auto& entry : progress_) {
    out.push_back({KafkaStreamSource(*config_.kafka, entry.first.first), entry.first.second,
                   entry.second.RowOf(lanes_.key(lane))});
  }
  return out;
}

void KafkaEventSource::MarkCommitted(size_t lane, const std::vector<SourcePosition>& last) {
  const std::string prefix = KafkaStreamSource(*config_.kafka, "");
  for (const SourcePosition& p : last) {
    TopicPartition tp(p.source.substr(prefix.size()), p.partition);
    auto it = progress_.find(tp);
    if (it != progress_.end()) it->second.SetRow(lanes_.key(lane), p);
  }
}

Status KafkaEventSource::Reseek() {
  std::vector<TopicPartition> partitions;
  for (const auto& entry : progress_) partitions.push_back(entry.first);
  generation_++;
  consumer_->unassign();
  progress_.clear();
  return AssignFromStore(partitions);
}

namespace {

// The most of a dead letter's bytes a truncated one keeps.
constexpr size_t kTruncatedDeadLetterBytes = 64 * 1024;

bool TooLarge(RdKafka::ErrorCode err) {
  return err == RdKafka::ERR_MSG_SIZE_TOO_LARGE || err == RdKafka::ERR_INVALID_MSG_SIZE;
}

// Produces one dead letter to `topic` (its first 64 KiB with a
// denormd-truncated header when `truncate`); `opaque` comes back in its
// delivery report.
RdKafka::ErrorCode ProduceDeadLetter(RdKafka::Producer* producer, const std::string& topic,
                                     const DeadLetter& letter, bool truncate, void* opaque) {
  const std::string key = letter.at.source + "/" + std::to_string(letter.at.partition) + "/" +
                          std::to_string(letter.at.position);
  RdKafka::Headers* headers = RdKafka::Headers::create();
  headers->add("denormd-reason", letter.reason);
  headers->add("denormd-source", key);
  size_t size = letter.raw.size();
  if (truncate) {
    headers->add("denormd-truncated", std::to_string(size));
    size = std::min(size, kTruncatedDeadLetterBytes);
  }
  RdKafka::ErrorCode err = producer->produce(
      topic, RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY,
      const_cast<char*>(letter.raw.data()), size, key.data(), key.size(), 0, headers, opaque);
  if (err != RdKafka::ERR_NO_ERROR) delete headers;  // librdkafka owns them only on success
  return err;
}

}  // namespace

Status KafkaEventSource::Publish(const std::vector<DeadLetter>& letters) {
  if (!dead_letter_producer_ || letters.empty()) return Status::Ok();
  DeliveryCounter& deliveries = rebalancer_->deliveries;
  const std::string& topic = config_.kafka->dead_letter_topic;
  // A letter too large for the producer or the broker is sent again with its
  // first 64 KiB and a denormd-truncated header (its original size): it
  // never stalls the consumer (the dead_letters table keeps it whole).
  std::vector<size_t> pending(letters.size());
  for (size_t i = 0; i < letters.size(); ++i) pending[i] = i;
  for (bool truncate : {false, true}) {
    deliveries.Reset();
    std::vector<size_t> retry;
    for (size_t i : pending) {
      void* opaque = reinterpret_cast<void*>(i + 1);
      RdKafka::ErrorCode err =
          ProduceDeadLetter(dead_letter_producer_.get(), topic, letters[i], truncate, opaque);
      if (!truncate && TooLarge(err)) {
        retry.push_back(i);
      } else if (err != RdKafka::ERR_NO_ERROR) {
        return Status::Transient("dead-letter topic " + topic + ": " + RdKafka::err2str(err));
      }
    }
    // flush() serves the delivery reports.
    RdKafka::ErrorCode err = dead_letter_producer_->flush(10000);
    if (err != RdKafka::ERR_NO_ERROR) {
      return Status::Transient("dead-letter topic " + topic + ": not acknowledged in 10 s (" +
                               RdKafka::err2str(err) + ")");
    }
    for (const auto& failure : deliveries.failed) {
      if (truncate || !TooLarge(failure.second)) {
        return Status::Transient("dead-letter topic " + topic + ": " +
                                 std::to_string(deliveries.failures) + " not delivered (" +
                                 deliveries.last_error + ")");
      }
      retry.push_back(reinterpret_cast<size_t>(failure.first) - 1);
    }
    if (retry.empty()) return Status::Ok();
    Log(LogLevel::kWarn, "dead_letter_truncated",
        {{"topic", topic}, {"letters", static_cast<uint64_t>(retry.size())}});
    pending = std::move(retry);
  }
  return Status::Ok();
}

std::map<KafkaEventSource::TopicPartition, int64_t> KafkaEventSource::Lag() const {
  std::map<TopicPartition, int64_t> lag;
  for (const auto& entry : progress_) {
    int64_t low = 0, high = 0;
    if (consumer_->get_watermark_offsets(entry.first.first, entry.first.second, &low, &high) !=
            RdKafka::ERR_NO_ERROR ||
        high < 0) {
      continue;
    }
    const int64_t after = lanes_.ResumeAfter(entry.second);
    int64_t next = after < 0 ? low : after + 1;
    lag[entry.first] = std::max<int64_t>(0, high - next);
  }
  return lag;
}

void KafkaEventSource::Close() {
  if (closed_ || !consumer_) return;
  closed_ = true;
  consumer_->close();  // leaves the group; the revoke runs in here (result: nothing to do)
  if (dead_letter_producer_) dead_letter_producer_->flush(5000);
  Log(LogLevel::kInfo, "kafka_closed");
}

Status QueryKafkaEndOffsets(const Config& config, std::map<std::string, int64_t>* out) {
  if (!config.kafka) return Status::InvalidInput("no source.kafka in the config");
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  DENORMD_RETURN_IF_ERROR(SetBaseKafkaProperties(*config.kafka, conf.get()));
  DENORMD_RETURN_IF_ERROR(SetUserKafkaProperties(*config.kafka, conf.get()));
  DENORMD_RETURN_IF_ERROR(SetKafkaProperties(conf.get(), {{"group.id", config.kafka->group + "-status"},
                                              {"log_level", "0"}}));
  std::string error;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(RdKafka::KafkaConsumer::create(conf.get(), error));
  if (!consumer) return Status::Fatal("cannot create a Kafka client: " + error);
  RdKafka::Metadata* raw = nullptr;
  RdKafka::ErrorCode err = consumer->metadata(true, nullptr, &raw, 5000);
  std::unique_ptr<RdKafka::Metadata> metadata(raw);
  if (err != RdKafka::ERR_NO_ERROR) {
    consumer->close();
    return Status::Transient("Kafka metadata from " + config.kafka->brokers + ": " +
                             RdKafka::err2str(err));
  }
  // The configured names, and the patterns (topics starting with '^', as
  // the subscription reads them; checked by the config parser).
  std::vector<std::regex> patterns;
  for (const TopicInput& input : config.kafka->inputs) {
    if (!input.IsPattern()) continue;
    try {
      patterns.emplace_back(input.topic, std::regex::ECMAScript);
    } catch (const std::regex_error&) {
    }
  }
  for (const RdKafka::TopicMetadata* topic : *metadata->topics()) {
    bool wanted = false;
    for (const std::string& t : config.kafka->topics) wanted = wanted || t == topic->topic();
    for (const std::regex& pattern : patterns) {
      wanted = wanted || std::regex_match(topic->topic(), pattern);
    }
    if (!wanted) continue;
    for (const RdKafka::PartitionMetadata* partition : *topic->partitions()) {
      int64_t low = 0, high = 0;
      if (consumer->query_watermark_offsets(topic->topic(), partition->id(), &low, &high, 5000) ==
          RdKafka::ERR_NO_ERROR) {
        (*out)[KafkaStreamSource(*config.kafka, topic->topic()) + "/" +
               std::to_string(partition->id())] = high;
      }
    }
  }
  consumer->close();
  return Status::Ok();
}

}  // namespace denormd
