// MemoryStore: the Store in process memory, for tests of the projection
// language and the batch logic without a database server (and for
// `denormd test`).
//
// Each transaction works on a private copy of the whole state and swaps it in
// on Commit(), so uncommitted work is invisible and a dropped transaction
// rolls back. Locks are no-ops (one transaction at a time). Not for large data.
#ifndef DENORMD_PROJECTIONS_MEMORY_STORE_H_
#define DENORMD_PROJECTIONS_MEMORY_STORE_H_

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "projections/store.h"

namespace denormd {

struct MemoryState {
  struct Document {
    std::string projection;
    std::optional<std::string> pk;
    std::string json;
  };
  // The index rows of one entity, as (relation name, target, sort).
  struct IndexRow {
    std::string relation;
    std::string target;
    std::string sort;
  };
  std::map<EntityKey, EntityRecord> entities;
  std::map<EntityKey, std::vector<IndexRow>> references;
  // (type, relation name, target) -> keys of its referrers, in order
  std::map<std::tuple<std::string, std::string, std::string>, std::set<IndexKey>> index;
  std::map<std::string, std::map<std::string, Document>> collections;  // collection -> id -> doc
  std::map<std::pair<std::string, int32_t>, StoredPosition> positions;
  std::vector<DeadLetter> dead_letters;
};

class MemoryStore : public Store {
 public:
  Status Begin(std::unique_ptr<StoreTransaction>* out) override;

  const MemoryState& state() const { return state_; }
  MemoryState* mutable_state() { return &state_; }

 private:
  friend class MemoryTransaction;
  MemoryState state_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_MEMORY_STORE_H_
