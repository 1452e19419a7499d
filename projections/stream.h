// Streams of events and what a batch records about them: positions, the
// dead letters, and the batch itself as the engine receives it.
//
// A stream is one Kafka topic partition, or one event log. Its position is
// kept per lane (projections/lanes.h): a row of the store per (stream, lane)
// holds the position of the last record of that lane's entity types the lane
// applied; a restart resumes after the lowest of them, skipping what each
// lane applied already (StreamProgress).
#ifndef DENORMD_PROJECTIONS_STREAM_H_
#define DENORMD_PROJECTIONS_STREAM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
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

// The entity types whose records one lane applies, as its position rows name
// them: ascending, "" standing for records that carry no entity type (dead
// letters, tombstones). Empty: every type (a single lane, `replay`, and
// every row a release before lanes wrote).
using LaneKey = std::vector<std::string>;

// "author,book", "" as "(no type)"; "(every type)" for {}: for logs and
// messages.
std::string LaneText(const LaneKey& lane);

// An event that cannot be applied, kept with its raw bytes and the reason.
struct DeadLetter {
  SourcePosition at;
  std::string raw;
  std::string reason;
};

// Per-stream progress recorded with a batch.
struct PositionUpdate {
  SourcePosition at;       // the last event of the batch in this stream
  LaneKey lane;            // the row it moves: its lane's
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
  LaneKey lane;
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
    std::string raw;  // the record as read, for a dead letter the engine decides on
  };
  std::vector<Item> events;
  std::vector<DeadLetter> dead_letters;
  std::vector<SourcePosition> last_positions;  // one per (source, partition)
  // Optional fencing: the stored position each stream is expected to have
  // before this batch (-1 = none). Streams not listed are not checked.
  std::vector<SourcePosition> previous_positions;
  LaneKey lane;               // the lane whose position rows the batch moves
  size_t raw_count = 0;       // records read, whatever became of them
  size_t skipped_count = 0;   // records that carry no change (e.g. tombstones)
};

// What the position rows of one stream (every lane's) say was applied, and
// where a lane resumes. A record counts as applied when its offset is at or
// below the position of a row naming its type, or of an every-type row; for
// a type no lane's row names, also of a row naming "": such records had no
// type under any layout of lanes that ran (a type declared later: they were
// dead letters), since every lane of a layout has its row from the layout's
// first assignment on (Lanes::RowsToAdd).
class StreamProgress {
 public:
  StreamProgress() = default;  // nothing applied
  explicit StreamProgress(std::vector<StoredPosition> rows) : rows_(std::move(rows)) {}

  // The last position applied of the records whose type is `type` ("": of
  // no type), -1 when none.
  int64_t AppliedThrough(const std::string& type) const;
  // Where a lane of `types` may start: every record of those types at or
  // below it was applied (the lowest AppliedThrough of them).
  int64_t AppliedThroughAll(const std::vector<std::string>& types) const;
  // The position of the row of `lane`, -1 when there is none.
  int64_t RowOf(const LaneKey& lane) const;
  bool HasRow(const LaneKey& lane) const;
  // Moves (or adds) the row of `lane` to `position`.
  void SetRow(const LaneKey& lane, const SourcePosition& at);
  bool empty() const { return rows_.empty(); }
  const std::vector<StoredPosition>& rows() const { return rows_; }

 private:
  std::vector<StoredPosition> rows_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_STREAM_H_
