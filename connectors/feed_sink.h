// FeedSink: where the change feed goes, and where the relay's progress
// commits with it. The relay (daemon/feed_relay.h) hands it one page of
// messages at a time together with the progress after them; a sink must make
// both visible together or neither (a Kafka transaction: KafkaFeedSink).
// FeedSinkKind: how a sink is made; the kinds are listed in
// connectors/feed_sink_registry.cc, one line each, and the relay takes any.
//
// A FeedSink is not thread-safe; a FeedSinkKind is immutable.
#ifndef DENORMD_CONNECTORS_FEED_SINK_H_
#define DENORMD_CONNECTORS_FEED_SINK_H_

#include <atomic>
#include <cstdint>
#include <memory>
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

struct Config;

// A kind of sink: its name and how to make one.
class FeedSinkKind {
 public:
  virtual ~FeedSinkKind() = default;
  // What the kind is called, e.g. "kafka".
  virtual const std::string& name() const = 0;
  // A sink publishing `config`'s feed (config.feed is set). Borrows
  // `config`, which must outlive the sink; `stopping` is polled while the
  // sink waits on the outside system (a stop ends the wait within seconds)
  // and must stay valid too.
  virtual std::unique_ptr<FeedSink> Make(const Config& config,
                                         const std::atomic<bool>* stopping) const = 0;
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_FEED_SINK_H_
