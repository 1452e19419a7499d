// KafkaFeedSink: the change feed on Apache Kafka, through librdkafka's
// transactional producer.
//
// Each Publish is one Kafka transaction holding the page's document changes
// and one progress record (key: the transactional id; value: the outbox
// cursor and the last sequence number, JSON) on the progress topic, a
// compacted topic of one partition. Consumers reading with
// isolation.level=read_committed see the changes of a page and the progress
// after them together, or neither.
//
// Open is the fencing step: init_transactions with the feed's
// transactional.id bumps the producer epoch, so an earlier producer with the
// same id (the previous run of the relay, killed mid-transaction, or a zombie
// relay) can commit nothing afterwards, and a transaction it left open is
// aborted (or, if its commit was already under way, completed) before
// init_transactions returns. Then Open reads the progress topic to its end
// with read_committed: the last progress record is exactly what is on the
// feed.
//
// Topics missing at Open are created: the progress topic compacted with one
// partition, the feed topics with the broker's defaults. Open also learns
// every topic's partitions, so that a session's first page does not wait
// for them.
//
// Too large: record batches are kept to feed.max_message_bytes (a broker
// checks a topic's max.message.bytes per batch). If a broker still refuses a
// batch (a topic whose limit is lower), the transaction is aborted, the sink
// sends one message per batch from then on, and the relay starts again: the
// next refusal names exactly the messages that are too large.
//
// Its FeedSinkKind, "kafka", is KafkaFeedSinkKind() in kafka_feed_sink.cc,
// listed in connectors/feed_sink_registry.cc.
//
// Not thread-safe.
#ifndef DENORMD_CONNECTORS_KAFKA_FEED_SINK_H_
#define DENORMD_CONNECTORS_KAFKA_FEED_SINK_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "connectors/feed_sink.h"

namespace RdKafka {
class KafkaConsumer;
class Producer;
class Topic;
}  // namespace RdKafka

namespace denormd {

class KafkaFeedSink : public FeedSink {
 public:
  // `config` (with a feed) must outlive the sink; `stopping` is polled while
  // waiting on the broker and must stay valid too.
  KafkaFeedSink(const Config& config, const std::atomic<bool>* stopping);
  ~KafkaFeedSink() override;

  Status Open(FeedProgress* progress) override;
  Status Publish(const std::vector<FeedMessage>& messages, const FeedProgress& progress,
                 std::vector<int64_t>* too_large) override;
  void Close() override;

  // Every topic the feed writes (the progress topic too) and its partitions,
  // as the last Open learnt them from the broker.
  const std::map<std::string, int>& partitions() const { return partitions_; }

 private:
  class Reports;
  // The progress topic and every feed topic, each once.
  std::vector<std::string> TopicNames() const;
  Status CreateTopics();
  // Learns every feed topic's partitions now (see the .cc) and keeps
  // `topics_` on them.
  Status LearnTopics();
  Status ReadProgress(FeedProgress* progress);
  // Ends the open transaction: commit (when `commit`) or abort.
  Status EndTransaction(bool commit);

  const Config& config_;
  const FeedConfig& feed_;
  const std::atomic<bool>* stopping_;
  std::unique_ptr<Reports> reports_;
  std::unique_ptr<RdKafka::Producer> producer_;
  std::vector<std::unique_ptr<RdKafka::Topic>> topics_;  // of producer_, kept known to it
  std::map<std::string, int> partitions_;                 // by topic, from LearnTopics
  bool topics_created_ = false;
  bool isolated_ = false;  // one message per record batch (after a refused batch)
};

// The progress record's value, and back (false when `json` is not one).
std::string FeedProgressJson(const FeedProgress& progress);
bool ParseFeedProgress(const std::string& json, FeedProgress* out);

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_KAFKA_FEED_SINK_H_
