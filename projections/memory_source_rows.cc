#include "projections/memory_source_rows.h"

#include "projections/memory_work.h"

namespace denormd {

Status MemorySourceRows::LoadEntities(const std::vector<EntityKey>& keys,
                                      std::vector<EntityRecord>* out) {
  MemoryState& state = work_.state();
  for (const EntityKey& key : keys) {
    auto it = state.entities.find(key);
    if (it == state.entities.end()) continue;
    out->push_back(it->second);
    state.entities_loaded++;
  }
  return Status::Ok();
}

Status MemorySourceRows::WriteEntities(const std::vector<EntityWrite>& writes) {
  MemoryState& state = work_.state();
  for (const EntityWrite& write : writes) {
    const EntityKey& key = write.record.key;
    work_.Remember(&state.entities, key);
    work_.Remember(&state.references, key);
    std::vector<MemoryState::IndexRow>& rows = state.references[key];
    if (write.replace_all) {
      while (!rows.empty()) {
        work_.RemoveIndexRow(key, rows[0].relation, rows[0].target, rows[0].sort, &rows);
      }
    }
    for (const ReferenceRow& row : write.removed) {
      work_.RemoveIndexRow(key, row.relation->name(), row.target, row.sort, &rows);
    }
    for (const ReferenceRow& row : write.added) work_.AddIndexRow(key, row, &rows);
    state.entities[key] = write.record;
  }
  return Status::Ok();
}

Status MemorySourceRows::ListEntityIds(const std::string& type, const std::string& after,
                                       size_t limit, std::vector<std::string>* out) {
  const MemoryState& state = work_.state();
  for (auto it = state.entities.upper_bound({type, after});
       it != state.entities.end() && it->first.type == type && out->size() < limit; ++it) {
    if (!it->second.deleted) out->push_back(it->first.id);
  }
  return Status::Ok();
}

}  // namespace denormd
