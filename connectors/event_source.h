// EventSource: where raw records come from (Kafka, an event log file,
// stdin), behind one interface, so that the batch loop (daemon/batch_loop.h)
// owns no concrete source.
//
// A source knows its streams' positions. The position of every stream lives
// in the store and commits with the batch that reached it; a source resumes
// from the stored positions (PositionLoader) and offers them back as fencing
// positions, so that a batch read from a stream another consumer has moved
// meanwhile cannot commit (Conflict).
//
// Not thread-safe: one thread calls every method.
#ifndef DENORMD_CONNECTORS_EVENT_SOURCE_H_
#define DENORMD_CONNECTORS_EVENT_SOURCE_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "formats/record.h"
#include "projections/stream.h"

namespace denormd {

// Loads the stored positions (partition -> last applied position) of the
// stream source `source` ("kafka:<group>:<topic>", "file:<path>").
using PositionLoader =
    std::function<Status(const std::string& source, std::map<int32_t, int64_t>* positions)>;

class EventSource {
 public:
  virtual ~EventSource() = default;

  // Appends up to `max` records to *out, waiting up to `max_delay_ms` after
  // the first for more and at most `idle_ms` for the first. A source may
  // return fewer, or none, at any time (a rebalance empties *out).
  virtual Status Poll(size_t max, int max_delay_ms, int idle_ms, std::vector<RawRecord>* out) = 0;

  // True once the source will never deliver another record (the end of a
  // log); a Kafka source never is.
  virtual bool Exhausted() const = 0;

  // Fencing positions for a batch read now: the stored position each of its
  // streams had when this source last resumed or committed it.
  virtual std::vector<SourcePosition> FencingPositions() const = 0;

  // Records that a batch ending at these positions committed.
  virtual void MarkCommitted(const std::vector<SourcePosition>& last) = 0;

  // After a Conflict: reload the stored positions and resume from them; or
  // an error when the source cannot (then the conflict ends the run).
  virtual Status Reseek() = 0;
};

// Where dead letters go besides the store's table (a Kafka dead-letter topic).
class DeadLetterSink {
 public:
  virtual ~DeadLetterSink() = default;
  // Delivers the letters, waiting for acknowledgement. At-least-once: a
  // retried batch may deliver a letter twice; the table stays exact.
  virtual Status Publish(const std::vector<DeadLetter>& letters) = 0;
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_EVENT_SOURCE_H_
