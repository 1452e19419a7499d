// MemoryWork: what the roles of one MemoryTransaction (memory_store.cc) share.
// Each role is an object of its own, in a file of its own
// (memory_source_rows.h, memory_reference_index.h, memory_document_tables.h,
// memory_bucket_tables.h, memory_stream_ledger.h, memory_write_locks.h); all
// of them write the store's MemoryState in place through this one object,
// which journals how to undo each write:
//   - the state, and the undo of every write, newest first, run when the
//     transaction ends without Commit (a failed batch leaves nothing);
//   - the reference index's rows, which both SourceRows and ReferenceIndex
//     write, one key at a time;
//   - the change capture: the document changes of published collections,
//     appended to the outbox with the transaction's change source.
//
// Owned by its MemoryTransaction, which destroys its roles first; the
// MemoryState must outlive it. Not thread-safe.
#ifndef DENORMD_PROJECTIONS_MEMORY_WORK_H_
#define DENORMD_PROJECTIONS_MEMORY_WORK_H_

#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "projections/memory_state.h"

namespace denormd {

class MemoryWork {
 public:
  explicit MemoryWork(MemoryState& state) : state_(state) {}
  // Undoes what was not committed.
  ~MemoryWork() { Undo(); }
  MemoryWork(const MemoryWork&) = delete;
  MemoryWork& operator=(const MemoryWork&) = delete;

  MemoryState& state() { return state_; }

  // Keeps every write made so far: nothing is undone for them.
  void Commit() { undo_.clear(); }
  // Undoes every write not committed, newest first.
  void Undo();

  // Journals `undo`, which reverts a write just made.
  void OnUndo(std::function<void()> undo) { undo_.push_back(std::move(undo)); }
  // Journals the current value of `map[key]` (or its absence) for rollback.
  template <typename Map>
  void Remember(Map* map, const typename Map::key_type& key) {
    auto it = map->find(key);
    if (it == map->end()) {
      undo_.push_back([map, key] { map->erase(key); });
    } else {
      undo_.push_back([map, key, value = it->second] { (*map)[key] = value; });
    }
  }

  // The reference index. An entity's rows are kept twice: in the index (by
  // target) and in `rows`, its own list (state().references[owner], which
  // the caller Remembers); both change together, and a change of the index
  // counts in index_rows_written. Adding a row the index holds, or removing
  // one it does not, changes neither. Each returns whether the index changed.
  bool AddIndexRow(const EntityKey& owner, const ReferenceRow& row,
                   std::vector<MemoryState::IndexRow>* rows);
  bool RemoveIndexRow(const EntityKey& owner, const std::string& relation,
                      const std::string& target, const std::string& sort,
                      std::vector<MemoryState::IndexRow>* rows);

  // The change capture. What the changes are attributed to; "" until set.
  void SetChangeSource(const std::string& source) { source_ = source; }
  // Appends a change to the outbox when `collection` is published; a
  // rollback takes it out again (its seq stays used).
  void Capture(const std::string& collection, const std::string& id,
               const std::optional<std::string>& pk, const std::optional<std::string>& doc);

 private:
  using IndexTarget = std::tuple<std::string, std::string, std::string>;

  // Index rows change one key at a time, journaled one key at a time (a hot
  // target holds thousands of keys).
  bool IndexErase(const IndexTarget& target, const IndexKey& key);
  bool IndexInsert(const IndexTarget& target, const IndexKey& key);

  MemoryState& state_;
  std::vector<std::function<void()>> undo_;
  std::string source_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_MEMORY_WORK_H_
