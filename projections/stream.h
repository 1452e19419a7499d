// Streams of events and what a batch records about them: positions, the
// dead letters, and the batch itself as the engine receives it.
//
// A stream is one Kafka topic partition, or one event log. The stored
// position of a stream is the position of the last applied event; a restart
// resumes after it.
#ifndef DENORMD_PROJECTIONS_STREAM_H_
#define DENORMD_PROJECTIONS_STREAM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "projections/entity.h"

namespace denormd {

// Where an event sits in its stream: a Kafka topic partition and offset, or
// an event log and line number (partition 0).
struct SourcePosition {
  std::string source;     // "kafka:<group>:<topic>" or "file:<absolute path>"
  int32_t partition = 0;
  int64_t position = 0;   // Kafka offset, or 1-based line number
};

// An event that cannot be applied, kept with its raw bytes and the reason.
struct DeadLetter {
  SourcePosition at;
  std::string raw;
  std::string reason;
};

// Per-stream progress recorded with a batch.
struct PositionUpdate {
  SourcePosition at;       // the last event of the batch in this stream
  // When set, the position this batch started from (-1: none stored yet).
  // Saving fails with Conflict if the stored position differs: another
  // consumer applied events of this stream meanwhile (a zombie instance after
  // a rebalance, or a second replay of one log).
  std::optional<int64_t> expected_previous;
  uint64_t applied = 0;    // events applied (not stale, not dead)
  uint64_t stale = 0;      // events skipped as stale
  uint64_t dead = 0;       // events sent to dead letters
};

struct StoredPosition {
  SourcePosition at;
  uint64_t applied = 0;
  uint64_t stale = 0;
  uint64_t dead = 0;
};

// A batch as the engine applies it: decoded events in stream order, the bad
// records as dead letters, and the last position of every stream the batch
// covers (formats/decoder.h builds it from raw records).
struct EventBatch {
  struct Item {
    SourcePosition at;
    EntityEvent event;
  };
  std::vector<Item> events;
  std::vector<DeadLetter> dead_letters;
  std::vector<SourcePosition> last_positions;  // one per (source, partition)
  // Optional fencing: the stored position each stream is expected to have
  // before this batch (-1 = none). Streams not listed are not checked.
  std::vector<SourcePosition> previous_positions;
  size_t raw_count = 0;       // records read, whatever became of them
  size_t skipped_count = 0;   // records that carry no change (e.g. tombstones)
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_STREAM_H_
