// EventSource: where raw records come from (Kafka, an event log file,
// stdin), behind one interface, so that the batch loop (daemon/batch_loop.h)
// owns no concrete source.
//
// A source knows its streams' positions. The position of every stream lives
// in the store, one row per lane (projections/lanes.h), and commits with the
// batch that reached it; a source resumes from the stored positions
// (PositionLoader) after the lowest row of its lanes, tells which records a
// lane applied already (Applied: lanes that commit apart are at different
// places), and offers each lane's rows back as fencing positions, so that a
// batch read from a stream another consumer has moved meanwhile cannot
// commit (Conflict).
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
#include "projections/lanes.h"
#include "projections/stream.h"

namespace denormd {

// Loads what the store says was applied of the streams `partitions` of the
// stream source `source` ("kafka:<group>:<topic>", "file:<path>"), first
// adding the rows `lanes` starts from where it has none (Lanes::RowsToAdd).
using PositionLoader =
    std::function<Status(const std::string& source, const std::vector<int32_t>& partitions,
                         const Lanes& lanes, std::map<int32_t, StreamProgress>* out)>;

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

  // The lanes the source resumes and fences for (one, unless the caller
  // gave more).
  virtual const Lanes& lanes() const = 0;

  // Whether the record at `at`, of entity type `type` ("" for none), was
  // applied already (by its lane, or under another layout of lanes): a lane
  // behind the others reads again what those applied. Never true for a
  // record a source with one lane delivers after a resume of its own.
  virtual bool Applied(const SourcePosition& at, const std::string& type) const = 0;

  // Fencing positions for a batch of `lane` read now: the stored position
  // the lane's row of each of its streams had when this source last resumed
  // or the lane last committed it.
  virtual std::vector<SourcePosition> FencingPositions(size_t lane) const = 0;

  // Records that a batch of `lane` ending at these positions committed.
  virtual void MarkCommitted(size_t lane, const std::vector<SourcePosition>& last) = 0;

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
