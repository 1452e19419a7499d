// KafkaEventSource: reads entity change events from Apache Kafka as a member
// of the configured consumer group, through librdkafka.
//
// Offsets are not committed to Kafka at all. The position of every partition
// lives in PostgreSQL and commits in the same transaction as the batch it
// covers; on every partition assignment the source asks the store for those
// positions (PositionLoader) and seeks to the next offset. So a crash at any
// point replays exactly the uncommitted events, and nothing is applied twice.
//
// A rebalance during polling discards the records read so far (they are read
// again from the stored positions). The source also remembers the position
// each assigned partition had when this instance took it or last committed
// it: those are its fencing positions, so a zombie instance that lost its
// partitions cannot commit over a newer owner.
//
// Not thread-safe: one thread calls every method.
#ifndef DENORMD_CONNECTORS_KAFKA_SOURCE_H_
#define DENORMD_CONNECTORS_KAFKA_SOURCE_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "connectors/event_source.h"

namespace RdKafka {
class KafkaConsumer;
class Message;
class Producer;
}  // namespace RdKafka

namespace denormd {

// The stream name under which a topic's positions are stored.
std::string KafkaStreamSource(const KafkaSourceConfig& kafka, const std::string& topic);

// How far the consumer reads ahead of the batches, set before the user's
// source.kafka.properties (which may override it): librdkafka's
// queued.min.messages, two batches of batch.max_events a partition, and
// queued.max.messages.kbytes, 16 MiB in all. With librdkafka's defaults
// (100,000 messages a partition, 64 MiB) a daemon behind its topic holds what
// it has not applied yet in memory: `run` on the benchmark's load and changes
// (131,100 events waiting in the topic) had an RSS of 90-119 MiB while
// loading with the defaults, 49-85 MiB with these, and took the same time
// (docs/benchmarks.md, "Memory: the consumer's read-ahead").
std::vector<std::pair<std::string, std::string>> ConsumerReadAhead(const BatchConfig& batch);

class KafkaEventSource : public EventSource, public DeadLetterSink {
 public:
  using TopicPartition = std::pair<std::string, int32_t>;

  // `stopping` is polled while waiting (e.g. for the store during an
  // assignment); it must stay valid while the source lives.
  // It resumes and fences for `lanes` (projections/lanes.h).
  KafkaEventSource(const Config& config, Lanes lanes, PositionLoader loader,
                   const std::atomic<bool>* stopping);
  ~KafkaEventSource() override;

  // Creates the consumer (and the dead-letter producer when configured) and
  // subscribes. Fails on a bad librdkafka property, with its message.
  Status Open();

  // Waits up to `idle_ms` for a first record; after it, takes the records
  // already fetched (up to `max`, for at most `max_delay_ms`) and returns as
  // soon as none is ready, so that batches follow the input's pace. Returns
  // early when stopping. A rebalance empties *out.
  Status Poll(size_t max, int max_delay_ms, int idle_ms, std::vector<RawRecord>* out) override;
  bool Exhausted() const override { return false; }
  const Lanes& lanes() const override { return lanes_; }
  bool Applied(const SourcePosition& at, const std::string& type) const override;
  std::vector<SourcePosition> FencingPositions(size_t lane) const override;
  void MarkCommitted(size_t lane, const std::vector<SourcePosition>& last) override;
  // Reloads stored positions and seeks every assigned partition to them.
  Status Reseek() override;

  // Sends dead letters to the dead-letter topic (if configured) and waits for
  // the broker's acknowledgement.
  Status Publish(const std::vector<DeadLetter>& letters) override;

  // Called at the start of every rebalance (revoke or assign), on the
  // polling thread, before the source reloads anything: a caller with
  // batches in flight beside the poll lets them end there (BatchLoop's
  // lanes), so that the positions loaded for the new assignment are the
  // ones they committed.
  void SetRebalanceHook(std::function<void()> hook) { rebalance_hook_ = std::move(hook); }

  // Lag per partition from the consumer's cached high watermarks:
  // high watermark - (the position its lanes resume after + 1).
  std::map<TopicPartition, int64_t> Lag() const;

  // Leaves the group cleanly (revokes partitions) and closes. Idempotent.
  void Close();

  // The largest message value accepted from now on (batch.max_event_bytes,
  // which it starts as); larger ones become refused records. For a reload.
  void SetMaxEventBytes(uint64_t bytes) { max_event_bytes_ = bytes; }

 private:
  class Rebalancer;
  Status LoadStoredPositions(const std::vector<TopicPartition>& partitions,
                             std::map<TopicPartition, StreamProgress>* out);
  Status AssignFromStore(std::vector<TopicPartition> partitions);
  RawRecord ToRecord(RdKafka::Message& message) const;

  const Config& config_;
  const Lanes lanes_;
  PositionLoader loader_;
  std::function<void()> rebalance_hook_;
  const std::atomic<bool>* stopping_;
  std::unique_ptr<Rebalancer> rebalancer_;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer_;
  std::unique_ptr<RdKafka::Producer> dead_letter_producer_;
  // Assigned partitions -> their stored rows, as the lanes commit.
  std::map<TopicPartition, StreamProgress> progress_;
  uint64_t generation_ = 0;                      // bumped by every rebalance
  uint64_t max_event_bytes_;
  bool closed_ = false;
};

// The end offsets (high watermarks) of every partition of the configured
// topics, keyed "<stream source>/<partition>" (see KafkaStreamSource).
Status QueryKafkaEndOffsets(const Config& config, std::map<std::string, int64_t>* out);

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_KAFKA_SOURCE_H_
