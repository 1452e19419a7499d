// MemoryStore: the Store in process memory, for tests of the projection
// language and the batch logic without a database server (and for
// `denormd test`).
//
// A transaction writes the state in place and journals how to undo each
// write; a transaction destroyed without Commit() undoes them in reverse, so
// a failed batch leaves nothing behind. Only one transaction may be open at a
// time (Begin fails otherwise); locks are no-ops.
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
    std::optional<BucketMeta> bucket;
    std::string id;
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
  // collection -> key -> document; the key is the id, or "<pk>\x1f<id>" in a
  // shared collection (keyed on (pk, id) like PostgreSQL's).
  std::map<std::string, std::map<std::string, Document>> collections;
  // Documents written or deleted per collection, ever (for tests that bound
  // what a change costs).
  std::map<std::string, uint64_t> document_writes;
  std::map<std::pair<std::string, int32_t>, StoredPosition> positions;
  std::vector<DeadLetter> dead_letters;
};

class MemoryStore : public Store {
 public:
  // Fails (Fatal) while another transaction of this store is open.
  Status Begin(std::unique_ptr<StoreTransaction>* out) override;

  const MemoryState& state() const { return state_; }
  MemoryState* mutable_state() { return &state_; }

 private:
  friend class MemoryTransaction;
  MemoryState state_;
  bool open_ = false;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_MEMORY_STORE_H_
