#include "projections/memory_source_rows.h"

#include "common/clock.h"
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
    work_.Remember(&state.updated_at, key);
    state.updated_at[key] = UnixSeconds();
  }
  return Status::Ok();
}

// The journal, while an apply is marked (projections/memory_admin.h).
Status MemorySourceRows::Journal(const std::vector<EntityChange>& changes) {
  MemoryState* state = &work_.state();
  if (state->model.applying.empty() || changes.empty()) return Status::Ok();
  const size_t size = state->journal.size();
  work_.OnUndo([state, size] { state->journal.resize(size); });
  for (const EntityChange& change : changes) {
    state->journal.push_back({change.key, change.before ? *change.before : EntityState(),
                              change.after ? *change.after : EntityState()});
  }
  return Status::Ok();
}

Status MemorySourceRows::TakeJournal(size_t limit, std::vector<JournaledChange>* out) {
  MemoryState* state = &work_.state();
  out->clear();
  while (!state->journal.empty() && (limit == 0 || out->size() < limit)) {
    out->push_back(state->journal.front());
    state->journal.pop_front();
  }
  work_.OnUndo([state, taken = *out] {
    state->journal.insert(state->journal.begin(), taken.begin(), taken.end());
  });
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
