// Entity change events: where they came from and what they say.
#ifndef DENORMD_PROJECTIONS_EVENT_H_
#define DENORMD_PROJECTIONS_EVENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "projections/json.h"

namespace denormd {

// Where a raw event sits in its stream: a Kafka topic partition and offset,
// or an event log file and line number (partition 0). The stored consumer
// position of a stream is the position of the last applied event; a restart
// resumes after it.
struct SourcePosition {
  std::string source;     // "kafka:<group>:<topic>" or "file:<absolute path>"
  int32_t partition = 0;
  int64_t position = 0;   // Kafka offset, or 1-based line number
};

// One message as read, before decoding.
struct RawEvent {
  SourcePosition at;
  std::string bytes;
  int64_t timestamp_ms = 0;  // Kafka message timestamp (Unix ms); 0 if none
};

struct EntityKey {
  std::string type;
  std::string id;
  bool operator<(const EntityKey& o) const { return type != o.type ? type < o.type : id < o.id; }
  bool operator==(const EntityKey& o) const { return type == o.type && id == o.id; }
};

enum class EventOp { kUpsert, kPatch, kDelete };

// A decoded, valid event.
struct EntityEvent {
  EntityKey key;
  EventOp op = EventOp::kUpsert;
  std::optional<uint64_t> version;
  JsonPtr data;  // upsert: the new data (an object); patch: the merge patch; delete: null
};

// Decodes and validates one event against the configured entity types.
// Returns InvalidInput with a reason a person can act on ("field \"version\"
// must be an unsigned integer") for anything that must go to dead letters.
Status DecodeEvent(const Config& config, const std::string& bytes, EntityEvent* out);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_EVENT_H_
