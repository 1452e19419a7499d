// FeedSink: where the change feed goes, and where the relay's progress
// commits with it. The relay (daemon/feed_relay.h) hands it one page of
// messages at a time together with the progress after them; a sink must make
// both visible together or neither (a Kafka transaction: KafkaFeedSink).
//
// Not thread-safe.
#ifndef DENORMD_CONNECTORS_FEED_SINK_H_
#define DENORMD_CONNECTORS_FEED_SINK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "projections/outbox.h"

namespace denormd {

// One document change as published.
struct FeedMessage {
  std::string topic;
  std::string key;
  std::optional<std::string> value;  // absent: a tombstone (the document was deleted)
  std::vector<std::pair<std::string, std::string>> headers;
  int64_t timestamp_ms = 0;          // the capture time
  int64_t outbox_seq = 0;            // which outbox row it comes from
};

// How far the feed is: the outbox cursor after the last published change,
// and the last sequence number given (the denormd-seq header; contiguous
// from 1, each number once).
struct FeedProgress {
  OutboxCursor cursor;
  uint64_t sequence = 0;
};

class FeedSink {
 public:
  virtual ~FeedSink() = default;
  // Becomes the feed's only writer: any earlier writer (a previous run of
  // this relay, a zombie) can commit nothing after this returns, and what it
  // left open is aborted. Then reads the last committed progress (none:
  // *progress stays as given).
  virtual Status Open(FeedProgress* progress) = 0;
  // Publishes `messages` and `progress` atomically. When the sink refuses
  // messages as too large, nothing is published, their outbox seqs are added
  // to *too_large and the result is InvalidInput (publish them otherwise and
  // call again). Any other error: nothing is known to be published; the
  // caller must Close and Open again (which tells what is).
  virtual Status Publish(const std::vector<FeedMessage>& messages, const FeedProgress& progress,
                         std::vector<int64_t>* too_large) = 0;
  // Drops the connection to the sink. Idempotent.
  virtual void Close() = 0;
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_FEED_SINK_H_
