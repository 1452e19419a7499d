#include "connectors/kafka_feed_sink.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <thread>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafkacpp.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "common/crash_point.h"
#include "common/log.h"
#include "connectors/kafka_client.h"
#include "projections/json.h"

namespace denormd {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kStepMs = 5000;             // one bounded wait on the broker
// How long a transactional call may keep retrying, and the transaction
// timeout (which librdkafka also makes the messages' delivery timeout): a
// broker away is noticed, and the relay starts over, within about this.
constexpr int kBrokerPatienceMs = 30000;
constexpr int kTransactionTimeoutMs = 30000;

std::string ErrorText(const RdKafka::Error& error) {
  return error.name() + ": " + error.str();
}

}  // namespace

std::string FeedProgressJson(const FeedProgress& progress) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("through");
  w.String(progress.cursor.through.c_str());
  w.Key("until");
  w.String(progress.cursor.until.c_str());
  w.Key("after");
  w.Int64(progress.cursor.after);
  w.Key("sequence");
  w.Uint64(progress.sequence);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

bool ParseFeedProgress(const std::string& json, FeedProgress* out) {
  JsonDocument doc;
  if (!ParseJson(json, &doc).ok() || !doc.IsObject()) return false;
  auto text = [&](const char* key, std::string* value) {
    auto it = doc.FindMember(key);
    if (it == doc.MemberEnd() || !it->value.IsString()) return false;
    *value = it->value.GetString();
    return true;
  };
  FeedProgress progress;
  auto after = doc.FindMember("after");
  auto sequence = doc.FindMember("sequence");
  if (!text("through", &progress.cursor.through) || !text("until", &progress.cursor.until) ||
      after == doc.MemberEnd() || !after->value.IsInt64() || sequence == doc.MemberEnd() ||
      !sequence->value.IsUint64()) {
    return false;
  }
  progress.cursor.after = after->value.GetInt64();
  progress.sequence = sequence->value.GetUint64();
  *out = progress;
  return true;
}

// The producer's callbacks: librdkafka's log into denormd's, and which
// messages of the open transaction the broker refused as too large.
class KafkaFeedSink::Reports : public RdKafka::DeliveryReportCb {
 public:
  void dr_cb(RdKafka::Message& message) override {
    const size_t bytes = message.len() + message.key_len();
    if (message.err() == RdKafka::ERR_NO_ERROR) return;
    failures++;
    last_error = message.errstr();
    if (message.err() == RdKafka::ERR_MSG_SIZE_TOO_LARGE && message.msg_opaque() != nullptr) {
      too_large.emplace(bytes, reinterpret_cast<intptr_t>(message.msg_opaque()) - 1);
    }
  }
  void Reset() {
    failures = 0;
    last_error.clear();
    too_large.clear();
  }
  KafkaLogger logger;
  uint64_t failures = 0;
  std::string last_error;
  // (bytes, index into the published messages) of the messages the broker
  // refused as too large.
  std::set<std::pair<size_t, intptr_t>> too_large;
};

KafkaFeedSink::KafkaFeedSink(const Config& config, const std::atomic<bool>* stopping)
    : config_(config), feed_(*config.feed), stopping_(stopping),
      reports_(std::make_unique<Reports>()) {}

KafkaFeedSink::~KafkaFeedSink() { Close(); }

void KafkaFeedSink::Close() {
  topics_.clear();  // before the producer they belong to
  producer_.reset();
}

std::vector<std::string> KafkaFeedSink::TopicNames() const {
  std::vector<std::string> topics = {feed_.progress_topic};
  if (!feed_.topic.empty()) topics.push_back(feed_.topic);
  for (const auto& entry : feed_.collections) topics.push_back(entry.second);
  std::sort(topics.begin(), topics.end());
  topics.erase(std::unique(topics.begin(), topics.end()), topics.end());
  return topics;
}

namespace {

// bootstrap.servers and client.id, as every denormd client sets them, and,
// when the feed goes to the source's cluster, the user's
// source.kafka.properties (SASL, TLS) as every client of it gets them.
Status SetFeedBaseProperties(const Config& config, RdKafka::Conf* conf) {
  KafkaSourceConfig kafka;
  kafka.brokers = config.feed->brokers;
  DENORMD_RETURN_IF_ERROR(SetBaseKafkaProperties(kafka, conf));
  if (config.kafka && config.kafka->brokers == config.feed->brokers) {
    DENORMD_RETURN_IF_ERROR(SetUserKafkaProperties(*config.kafka, conf));
  }
  return Status::Ok();
}

}  // namespace

Status KafkaFeedSink::Open(FeedProgress* progress) {
  Close();
  reports_->logger.Reset();
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  DENORMD_RETURN_IF_ERROR(SetFeedBaseProperties(config_, conf.get()));
  // Room for the largest message the relay sends whole. A broker checks a
  // topic's max.message.bytes against a whole record batch, so batches are
  // kept to feed.max_message_bytes too: small messages batched together are
  // never refused where each alone would pass. After a broker refused a
  // batch anyway (a topic whose limit is below max_message_bytes), every
  // message goes alone, so that a refusal names exactly the large one.
  const uint64_t max_bytes = std::max<uint64_t>(1000000, feed_.max_message_bytes + 65536);
  DENORMD_RETURN_IF_ERROR(SetKafkaProperties(
      conf.get(), {{"transactional.id", feed_.transactional_id},
                   // As Java clients partition: a consumer in Kafka Streams can join on the key.
                   {"partitioner", "murmur2_random"},
                   {"message.max.bytes", std::to_string(max_bytes)},
                   {"batch.size", std::to_string(feed_.max_message_bytes)},
                   {"transaction.timeout.ms", std::to_string(kTransactionTimeoutMs)},
                   {"linger.ms", isolated_ ? "0" : "1"}}));
  if (isolated_) DENORMD_RETURN_IF_ERROR(SetKafkaProperties(conf.get(), {{"batch.num.messages", "1"}}));
  std::string error;
  if (conf->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(reports_.get()), error) !=
          RdKafka::Conf::CONF_OK ||
      conf->set("event_cb", static_cast<RdKafka::EventCb*>(&reports_->logger), error) !=
          RdKafka::Conf::CONF_OK) {
    return Status::Fatal("librdkafka: " + error);
  }
  DENORMD_RETURN_IF_ERROR(SetKafkaProperties(conf.get(), feed_.properties));
  producer_.reset(RdKafka::Producer::create(conf.get(), error));
  if (!producer_) return Status::InvalidInput("cannot create the feed's Kafka producer: " + error);
  if (!topics_created_) DENORMD_RETURN_IF_ERROR(CreateTopics());

  // Fencing. Retriable failures (the coordinator not there yet, an earlier
  // transaction still completing) are retried for a while.
  const auto deadline = Clock::now() + std::chrono::milliseconds(kBrokerPatienceMs);
  while (true) {
    std::unique_ptr<RdKafka::Error> failed(producer_->init_transactions(kStepMs));
    if (!failed) break;
    if (!failed->is_retriable() || Clock::now() > deadline || stopping_->load()) {
      Status status = Status::Transient("feed: init_transactions: " + ErrorText(*failed));
      Close();
      return status;
    }
  }
  Status read = LearnTopics();
  if (read.ok()) read = ReadProgress(progress);
  if (!read.ok()) Close();
  return read;
}

// A producer asks for a topic's partitions only once a message for it is
// queued, and then not at once: librdkafka scans its new topics once a
// second. So without this the first page of every session (every start,
// every restart after a failure) waited up to a second before its first
// message even had a partition; the benchmark measured 264-764 ms on such
// pages, and the changes captured meanwhile waited with them
// (docs/benchmarks.md, "The change feed"). Asking for each topic here, with
// a handle that keeps the topic known to the producer, moves that wait to
// Open, where nothing waits for it.
Status KafkaFeedSink::LearnTopics() {
  topics_.clear();
  partitions_.clear();
  for (const std::string& name : TopicNames()) {
    std::string error;
    std::unique_ptr<RdKafka::Topic> topic(RdKafka::Topic::create(producer_.get(), name, nullptr, error));
    if (!topic) return Status::InvalidInput("feed topic " + name + ": " + error);
    RdKafka::Metadata* answer = nullptr;
    const RdKafka::ErrorCode err = producer_->metadata(false, topic.get(), &answer, kStepMs);
    std::unique_ptr<RdKafka::Metadata> metadata(answer);
    if (err != RdKafka::ERR_NO_ERROR) {
      return Status::Transient("feed: the partitions of " + name + ": " + RdKafka::err2str(err));
    }
    // A topic the broker does not describe yet (just created, no leader)
    // is left to the producer to learn, as before: not an error here.
    for (const RdKafka::TopicMetadata* described : *metadata->topics()) {
      if (described->topic() == name && described->err() == RdKafka::ERR_NO_ERROR) {
        partitions_[name] = static_cast<int>(described->partitions()->size());
      }
    }
    topics_.push_back(std::move(topic));
  }
  return Status::Ok();
}

// Creates the topics that do not exist: the progress topic (compacted, one
// partition) and the feed's topics (the broker's defaults). Refusals other
// than "already exists" are logged, not fatal: the topics may exist and this
// client only lack the right to create them.
Status KafkaFeedSink::CreateTopics() {
  const std::vector<std::string> topics = TopicNames();
  rd_kafka_t* rk = producer_->c_ptr();
  char errstr[512];
  std::vector<rd_kafka_NewTopic_t*> requests;
  for (const std::string& topic : topics) {
    const bool progress = topic == feed_.progress_topic;
    rd_kafka_NewTopic_t* request =
        rd_kafka_NewTopic_new(topic.c_str(), progress ? 1 : -1, -1, errstr, sizeof errstr);
    if (request == nullptr) {
      rd_kafka_NewTopic_destroy_array(requests.data(), requests.size());
      return Status::InvalidInput("feed topic " + topic + ": " + errstr);
    }
    if (progress) rd_kafka_NewTopic_set_config(request, "cleanup.policy", "compact");
    requests.push_back(request);
  }
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t* options = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_request_timeout(options, kStepMs, errstr, sizeof errstr);
  rd_kafka_CreateTopics(rk, requests.data(), requests.size(), options, queue);
  rd_kafka_NewTopic_destroy_array(requests.data(), requests.size());
  rd_kafka_AdminOptions_destroy(options);
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, kStepMs * 2);
  Status status = Status::Ok();
  if (event == nullptr) {
    status = Status::Transient("feed: creating topics: no answer from " + feed_.brokers);
  } else if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    status = Status::Transient(std::string("feed: creating topics: ") +
                               rd_kafka_event_error_string(event));
  } else {
    size_t count = 0;
    const rd_kafka_topic_result_t** results =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(event), &count);
    for (size_t i = 0; i < count; ++i) {
      const rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);
      const std::string topic = rd_kafka_topic_result_name(results[i]);
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        Log(LogLevel::kInfo, "feed_topic_created", {{"topic", topic}});
      } else if (err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        const char* message = rd_kafka_topic_result_error_string(results[i]);
        Log(LogLevel::kWarn, "feed_topic_not_created",
            {{"topic", topic}, {"error", message != nullptr ? message : rd_kafka_err2str(err)}});
      }
    }
  }
  if (event != nullptr) rd_kafka_event_destroy(event);
  rd_kafka_queue_destroy(queue);
  if (status.ok()) topics_created_ = true;
  return status;
}

// Reads the progress topic's single partition from near its end to its end,
// read_committed, keeping the last record of this relay. Records of aborted
// transactions are never delivered. The window grows until it holds one or
// starts at the partition's beginning (then there is none yet).
Status KafkaFeedSink::ReadProgress(FeedProgress* progress) {
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  DENORMD_RETURN_IF_ERROR(SetFeedBaseProperties(config_, conf.get()));
  DENORMD_RETURN_IF_ERROR(SetKafkaProperties(
      conf.get(), {{"group.id", feed_.transactional_id + ".reader"},  // never joins: assign only
                   {"isolation.level", "read_committed"},
                   {"enable.auto.commit", "false"},
                   {"enable.partition.eof", "true"}}));
  std::string error;
  if (conf->set("event_cb", static_cast<RdKafka::EventCb*>(&reports_->logger), error) !=
      RdKafka::Conf::CONF_OK) {
    return Status::Fatal("librdkafka: " + error);
  }
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(RdKafka::KafkaConsumer::create(conf.get(), error));
  if (!consumer) return Status::InvalidInput("cannot create the feed's progress reader: " + error);
  const std::string& topic = feed_.progress_topic;
  int64_t low = 0, high = 0;
  RdKafka::ErrorCode err = consumer->query_watermark_offsets(topic, 0, &low, &high, kStepMs * 2);
  if (err != RdKafka::ERR_NO_ERROR) {
    consumer->close();
    return Status::Transient("feed: the end of " + topic + ": " + RdKafka::err2str(err));
  }
  std::string last;
  bool found = false;
  for (int64_t span = 256; !found; span *= 8) {
    const int64_t start = std::max(low, high - span);
    if (start >= high) break;
    std::unique_ptr<RdKafka::TopicPartition> partition(RdKafka::TopicPartition::create(topic, 0, start));
    std::vector<RdKafka::TopicPartition*> assignment = {partition.get()};
    err = consumer->assign(assignment);
    if (err != RdKafka::ERR_NO_ERROR) {
      consumer->close();
      return Status::Transient("feed: reading " + topic + ": " + RdKafka::err2str(err));
    }
    const auto deadline = Clock::now() + std::chrono::milliseconds(kBrokerPatienceMs);
    bool at_end = false;
    while (!at_end) {
      if (Clock::now() > deadline || stopping_->load()) {
        consumer->close();
        return Status::Transient("feed: " + topic + " not read to its end (offset " +
                                 std::to_string(high) + ") in time");
      }
      std::unique_ptr<RdKafka::Message> message(consumer->consume(200));
      switch (message->err()) {
        case RdKafka::ERR_NO_ERROR:
          if (message->key() != nullptr && *message->key() == feed_.transactional_id &&
              message->payload() != nullptr) {
            last.assign(static_cast<const char*>(message->payload()), message->len());
            found = true;
          }
          if (message->offset() + 1 >= high) at_end = true;
          break;
        case RdKafka::ERR__PARTITION_EOF:
        case RdKafka::ERR__TIMED_OUT: {
          // read_committed stops at the last stable offset; the end is
          // reached once the position passed every record there was when
          // this relay fenced its predecessors (their transactions are
          // resolved: aborted records and commit markers are skipped).
          std::vector<RdKafka::TopicPartition*> position = {partition.get()};
          const bool known = consumer->position(position) == RdKafka::ERR_NO_ERROR;
          Log(LogLevel::kDebug, "feed_progress_read",
              {{"at", message->err() == RdKafka::ERR__PARTITION_EOF ? "eof" : "timeout"},
               {"position", known ? partition->offset() : -1}, {"high", high}});
          if (known && partition->offset() >= high) at_end = true;
          break;
        }
        default:
          break;  // transport errors: librdkafka retries; the deadline bounds it
      }
    }
    if (start == low) break;
  }
  consumer->close();
  if (!found) return Status::Ok();
  if (!ParseFeedProgress(last, progress)) {
    return Status::Fatal("feed: the last progress record of " + feed_.transactional_id + " on " +
                         topic + " is not one denormd wrote: " + last);
  }
  return Status::Ok();
}

// A failure leaves the transaction as it is: the relay then closes the sink,
// and the next Open's init_transactions aborts it (or lets the coordinator
// finish a commit already under way) — no need to wait for an abort here
// while the broker is away.
Status KafkaFeedSink::EndTransaction(bool commit) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(kBrokerPatienceMs);
  while (true) {
    std::unique_ptr<RdKafka::Error> failed(commit ? producer_->commit_transaction(kStepMs)
                                                  : producer_->abort_transaction(kStepMs));
    if (!failed) return Status::Ok();
    if (failed->is_retriable() && Clock::now() < deadline && !stopping_->load()) continue;
    return Status::Transient(std::string("feed: ") + (commit ? "commit" : "abort") +
                             "_transaction: " + ErrorText(*failed));
  }
}

Status KafkaFeedSink::Publish(const std::vector<FeedMessage>& messages, const FeedProgress& progress,
                              std::vector<int64_t>* too_large) {
  if (!producer_) return Status::Transient("feed: not open");
  reports_->Reset();
  {
    std::unique_ptr<RdKafka::Error> failed(producer_->begin_transaction());
    if (failed) return Status::Transient("feed: begin_transaction: " + ErrorText(*failed));
  }
  auto send = [&](const std::string& topic, int32_t partition, const std::string& key,
                  const std::string* value, int64_t timestamp_ms,
                  const std::vector<std::pair<std::string, std::string>>& header_list,
                  intptr_t index) -> RdKafka::ErrorCode {
    while (true) {
      RdKafka::Headers* headers = RdKafka::Headers::create();
      for (const auto& header : header_list) headers->add(header.first, header.second);
      RdKafka::ErrorCode code = producer_->produce(
          topic, partition, RdKafka::Producer::RK_MSG_COPY,
          value == nullptr ? nullptr : const_cast<char*>(value->data()),
          value == nullptr ? 0 : value->size(), key.data(), key.size(), timestamp_ms, headers,
          reinterpret_cast<void*>(index + 1));
      if (code == RdKafka::ERR_NO_ERROR) return code;
      delete headers;  // ownership passes to librdkafka only on success
      if (code != RdKafka::ERR__QUEUE_FULL || stopping_->load()) return code;
      producer_->poll(50);
    }
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    const FeedMessage& m = messages[i];
    RdKafka::ErrorCode code =
        send(m.topic, RdKafka::Topic::PARTITION_UA, m.key, m.value ? &*m.value : nullptr,
             m.timestamp_ms, m.headers, static_cast<intptr_t>(i));
    if (code == RdKafka::ERR_MSG_SIZE_TOO_LARGE) {
      too_large->push_back(m.outbox_seq);
    } else if (code != RdKafka::ERR_NO_ERROR) {
      return Status::Transient("feed: producing to " + m.topic + ": " + RdKafka::err2str(code));
    }
  }
  if (!too_large->empty()) {
    DENORMD_RETURN_IF_ERROR(EndTransaction(false));
    return Status::InvalidInput(std::to_string(too_large->size()) +
                                " messages larger than the producer accepts");
  }
  const std::string value = FeedProgressJson(progress);
  RdKafka::ErrorCode code = send(feed_.progress_topic, 0, feed_.transactional_id, &value, 0, {}, -1);
  if (code != RdKafka::ERR_NO_ERROR) {
    return Status::Transient("feed: producing to " + feed_.progress_topic + ": " +
                             RdKafka::err2str(code));
  }
  CrashPoint("feed_before_kafka_commit");
  Status committed = EndTransaction(true);
  if (committed.ok()) return committed;
  if (!reports_->too_large.empty()) {
    if (!isolated_) {
      // The broker refused a whole record batch: which of its messages is
      // too large is unknown. From now on every message goes alone; the
      // relay starts again (Open) and publishes the page once more.
      isolated_ = true;
      Log(LogLevel::kWarn, "feed_batch_refused",
          {{"messages", static_cast<uint64_t>(reports_->too_large.size())},
           {"reason", "a topic's max.message.bytes is below feed.max_message_bytes; publishing "
                      "one message per record batch from now on (lower max_message_bytes)"}});
      return Status::Transient("feed: the broker refused a record batch as too large");
    }
    for (const auto& refused : reports_->too_large) {
      if (refused.second >= 0 && static_cast<size_t>(refused.second) < messages.size()) {
        too_large->push_back(messages[refused.second].outbox_seq);
      }
    }
    // The relay publishes the page again on this producer: end this one.
    DENORMD_RETURN_IF_ERROR(EndTransaction(false));
    if (!too_large->empty()) {
      return Status::InvalidInput(std::to_string(too_large->size()) +
                                  " messages refused by the broker as too large");
    }
  }
  return committed;
}

namespace {

class Kind : public FeedSinkKind {
 public:
  const std::string& name() const override { return name_; }
  std::unique_ptr<FeedSink> Make(const Config& config,
                                 const std::atomic<bool>* stopping) const override {
    return std::make_unique<KafkaFeedSink>(config, stopping);
  }

 private:
  const std::string name_ = "kafka";
};

}  // namespace

const FeedSinkKind& KafkaFeedSinkKind() {
  static const Kind kind;
  return kind;
}

}  // namespace denormd
