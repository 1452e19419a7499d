// MemoryStore: the Store interface in process memory, for unit tests of the
// projection language and the batch logic without a database server.
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
  std::map<EntityKey, EntityRecord> entities;
  std::map<EntityKey, std::vector<ReferenceRow>> references;
  // (type, relation, target) -> (sort, id), in referrer order
  std::map<std::tuple<std::string, std::string, std::string>,
           std::set<std::pair<std::string, std::string>>>
      index;
  std::map<std::string, std::map<std::string, Document>> collections;  // collection -> id -> doc
  std::map<std::pair<std::string, int32_t>, StoredPosition> positions;
  std::vector<DeadLetter> dead_letters;
};

class MemoryStore : public Store {
 public:
  Status Begin(std::unique_ptr<StoreTransaction>* out) override;

  const MemoryState& state() const { return state_; }
  MemoryState* mutable_state() { return &state_; }
  // Makes the next Commit() fail with `status` (once), to test rollback.
  void FailNextCommit(Status status) { fail_next_commit_ = std::move(status); }

 private:
  friend class MemoryTransaction;
  MemoryState state_;
  Status fail_next_commit_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_MEMORY_STORE_H_
