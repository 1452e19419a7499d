// Entities as the engine sees them: their keys, their stored state, and the
// decoded events that change them.
#ifndef DENORMD_PROJECTIONS_ENTITY_H_
#define DENORMD_PROJECTIONS_ENTITY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "projections/json.h"

namespace denormd {

struct EntityKey {
  std::string type;
  std::string id;
  bool operator<(const EntityKey& o) const { return type != o.type ? type < o.type : id < o.id; }
  bool operator==(const EntityKey& o) const { return type == o.type && id == o.id; }
};

// The stored state of an entity: live, or a tombstone left by a delete.
struct EntityRecord {
  EntityKey key;
  std::optional<uint64_t> version;
  bool deleted = false;
  JsonPtr data;  // null when deleted

  bool live() const { return !deleted && data != nullptr; }
};

// An entity's state, if it has one at all.
using EntityState = std::optional<EntityRecord>;

inline bool IsLive(const EntityState& state) { return state && state->live(); }

enum class EventOp { kUpsert, kPatch, kDelete };

// A decoded, valid change of one entity.
struct EntityEvent {
  EntityKey key;
  EventOp op = EventOp::kUpsert;
  std::optional<uint64_t> version;
  JsonPtr data;  // upsert: the new data (an object); patch: the merge patch; delete: null
  // Upsert: top-level members the source did not send and that keep their
  // stored value (a Debezium update leaves an unchanged TOASTed column out
  // and writes a placeholder in its place, which `data` still holds). An
  // event with such members for an entity that has no live stored state is
  // refused as a dead letter.
  std::vector<std::string> unchanged;
};

// What a batch did to one entity: its state before and after. Only changes
// of the data (or of liveness) are changes; a new version alone is not.
struct EntityChange {
  EntityKey key;
  const EntityState* before = nullptr;
  const EntityState* after = nullptr;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_ENTITY_H_
