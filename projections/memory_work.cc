#include "projections/memory_work.h"

#include <algorithm>

namespace denormd {

void MemoryWork::Undo() {
  for (auto undo = undo_.rbegin(); undo != undo_.rend(); ++undo) (*undo)();
  undo_.clear();
}

bool MemoryWork::AddIndexRow(const EntityKey& owner, const ReferenceRow& row,
                             std::vector<MemoryState::IndexRow>* rows) {
  if (!IndexInsert({owner.type, row.relation->name(), row.target}, {row.sort, owner.id})) {
    return false;
  }
  rows->push_back({row.relation->name(), row.target, row.sort});
  state_.index_rows_written++;
  return true;
}

bool MemoryWork::RemoveIndexRow(const EntityKey& owner, const std::string& relation,
                                const std::string& target, const std::string& sort,
                                std::vector<MemoryState::IndexRow>* rows) {
  const bool erased = IndexErase({owner.type, relation, target}, {sort, owner.id});
  if (erased) state_.index_rows_written++;
  rows->erase(std::remove_if(rows->begin(), rows->end(),
                             [&](const MemoryState::IndexRow& stored) {
                               return stored.relation == relation && stored.target == target &&
                                      stored.sort == sort;
                             }),
              rows->end());
  return erased;
}

void MemoryWork::Capture(const std::string& collection, const std::string& id,
                         const std::optional<std::string>& pk,
                         const std::optional<std::string>& doc) {
  if (!state_.published.count(collection)) return;
  const size_t size = state_.outbox.size();
  undo_.push_back([this, size] { state_.outbox.resize(size); });
  state_.AppendToOutbox(collection, id, pk, doc, source_);
}

bool MemoryWork::IndexErase(const IndexTarget& target, const IndexKey& key) {
  auto it = state_.index.find(target);
  if (it == state_.index.end() || it->second.erase(key) == 0) return false;
  if (it->second.empty()) state_.index.erase(it);
  undo_.push_back([this, target, key] { state_.index[target].insert(key); });
  return true;
}

bool MemoryWork::IndexInsert(const IndexTarget& target, const IndexKey& key) {
  if (!state_.index[target].insert(key).second) return false;
  undo_.push_back([this, target, key] {
    auto it = state_.index.find(target);
    it->second.erase(key);
    if (it->second.empty()) state_.index.erase(it);
  });
  return true;
}

}  // namespace denormd

