#include "projections/memory_reference_index.h"

#include <iterator>
#include <set>

#include "projections/memory_work.h"

namespace denormd {

Status MemoryReferenceIndex::Scan(const Relation& relation, const std::vector<IndexRange>& ranges,
                                  Read read, std::vector<Referrer>* out) {
  MemoryState& state = work_.state();
  for (const IndexRange& range : ranges) {
    for (const IndexKey& key : RangeKeys(relation, range)) {
      Referrer referrer{range.target, key.sort, state.entities.at({relation.entity_type(), key.id})};
      if (read == Read::kKeys) {
        referrer.entity.data = nullptr;
      } else {
        state.referrers_loaded++;
      }
      out->push_back(std::move(referrer));
      state.referrers_read[relation.entity_type() + "." + relation.name()]++;
    }
  }
  return Status::Ok();
}

Status MemoryReferenceIndex::Count(const Relation& relation, const std::vector<IndexRange>& ranges,
                                   std::map<std::string, uint64_t>* out) {
  const MemoryState& state = work_.state();
  for (const IndexRange& range : ranges) {
    // As PostgreSQL's store: a whole range is read from counters, which a
    // relation that is not counted does not keep.
    if (!range.from && !relation.counted()) {
      return Status::Fatal("internal: the counters of relation " + relation.name() +
                           " were asked for; a link's sides and pairs keep none");
    }
    auto it = state.index.find({relation.entity_type(), relation.name(), range.target});
    uint64_t& count = (*out)[range.target];
    count = 0;
    if (it == state.index.end()) continue;
    count = range.from ? std::distance(it->second.lower_bound(*range.from), it->second.end())
                       : it->second.size();
  }
  return Status::Ok();
}

Status MemoryReferenceIndex::ListTargets(const Relation& relation, const std::string& after,
                                         size_t limit, std::vector<std::string>* out) {
  const MemoryState& state = work_.state();
  const std::string& type = relation.entity_type();
  for (auto it = state.index.upper_bound({type, relation.name(), after});
       it != state.index.end() && std::get<0>(it->first) == type &&
       std::get<1>(it->first) == relation.name() && out->size() < limit;
       ++it) {
    out->push_back(std::get<2>(it->first));
  }
  return Status::Ok();
}

Status MemoryReferenceIndex::RowsOf(const std::vector<EntityKey>& entities,
                                    std::vector<StoredRow>* out) {
  const MemoryState& state = work_.state();
  for (const EntityKey& key : entities) {
    auto it = state.references.find(key);
    if (it == state.references.end()) continue;
    for (const MemoryState::IndexRow& row : it->second) {
      out->push_back({key, row.relation, row.target, row.sort});
    }
  }
  return Status::Ok();
}

Status MemoryReferenceIndex::WriteRows(const std::vector<OwnedRows>& writes,
                                       std::vector<WrittenRow>* written) {
  MemoryState& state = work_.state();
  for (const OwnedRows& write : writes) {
    const EntityKey& key = write.owner;
    work_.Remember(&state.references, key);
    std::vector<MemoryState::IndexRow>& rows = state.references[key];
    for (const ReferenceRow& row : write.removed) {
      if (work_.RemoveIndexRow(key, row.relation->name(), row.target, row.sort, &rows) &&
          written != nullptr) {
        written->push_back({row.relation, row.target, key.id, false});
      }
    }
    for (const ReferenceRow& row : write.added) {
      if (work_.AddIndexRow(key, row, &rows) && written != nullptr) {
        written->push_back({row.relation, row.target, key.id, true});
      }
    }
  }
  return Status::Ok();
}

std::vector<IndexKey> MemoryReferenceIndex::RangeKeys(const Relation& relation,
                                                      const IndexRange& range) const {
  std::vector<IndexKey> keys;
  const MemoryState& state = work_.state();
  auto it = state.index.find({relation.entity_type(), relation.name(), range.target});
  if (it == state.index.end()) return keys;
  const std::set<IndexKey>& all = it->second;
  const size_t limit = range.limit == 0 ? all.size() : range.limit;
  if (range.backward) {
    auto end = range.from ? all.lower_bound(*range.from) : all.end();
    for (auto at = std::make_reverse_iterator(end); at != all.rend() && keys.size() < limit; ++at) {
      keys.push_back(*at);
    }
  } else {
    auto at = range.from ? all.lower_bound(*range.from) : all.begin();
    for (; at != all.end() && keys.size() < limit; ++at) keys.push_back(*at);
  }
  return keys;
}

}  // namespace denormd
