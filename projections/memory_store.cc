#include "projections/memory_store.h"

#include <algorithm>

namespace denormd {

class MemoryTransaction : public StoreTransaction,
                          public SourceRows,
                          public ReferenceIndex,
                          public DocumentTables,
                          public StreamLedger,
                          public WriteLocks {
 public:
  explicit MemoryTransaction(MemoryStore* store) : store_(store), state_(store->state_) {}

  SourceRows& source() override { return *this; }
  ReferenceIndex& index() override { return *this; }
  DocumentTables& documents() override { return *this; }
  StreamLedger& ledger() override { return *this; }
  WriteLocks& locks() override { return *this; }

  Status Commit() override {
    store_->state_ = std::move(state_);
    return Status::Ok();
  }

  // WriteLocks: one transaction at a time, nothing to lock.
  Status LockWriters(bool /*exclusive*/) override { return Status::Ok(); }
  Status LockKeys(const std::vector<std::string>& /*keys*/, Mode /*mode*/) override {
    return Status::Ok();
  }

  // SourceRows.
  Status LoadEntities(const std::vector<EntityKey>& keys,
                      std::vector<EntityRecord>* out) override {
    for (const EntityKey& key : keys) {
      auto it = state_.entities.find(key);
      if (it != state_.entities.end()) out->push_back(it->second);
    }
    return Status::Ok();
  }

  Status WriteEntities(const std::vector<EntityWrite>& writes) override {
    for (const EntityWrite& write : writes) {
      const EntityKey& key = write.record.key;
      for (const MemoryState::IndexRow& row : state_.references[key]) {
        auto it = state_.index.find({key.type, row.relation, row.target});
        if (it != state_.index.end()) {
          it->second.erase({row.sort, key.id});
          if (it->second.empty()) state_.index.erase(it);
        }
      }
      std::vector<MemoryState::IndexRow>& rows = state_.references[key];
      rows.clear();
      for (const ReferenceRow& row : write.references) {
        rows.push_back({row.relation->name(), row.target, row.sort});
        state_.index[{key.type, row.relation->name(), row.target}].insert({row.sort, key.id});
      }
      state_.entities[key] = write.record;
    }
    return Status::Ok();
  }

  Status ListEntityIds(const std::string& type, const std::string& after, size_t limit,
                       std::vector<std::string>* out) override {
    for (auto it = state_.entities.upper_bound({type, after});
         it != state_.entities.end() && it->first.type == type && out->size() < limit; ++it) {
      if (!it->second.deleted) out->push_back(it->first.id);
    }
    return Status::Ok();
  }

  // ReferenceIndex.
  Status Scan(const Relation& relation, const std::vector<IndexRange>& ranges, Read read,
              std::vector<Referrer>* out) override {
    for (const IndexRange& range : ranges) {
      std::vector<IndexKey> keys = RangeKeys(relation, range);
      if (range.backward) std::reverse(keys.begin(), keys.end());
      if (range.limit > 0 && keys.size() > range.limit) keys.resize(range.limit);
      for (const IndexKey& key : keys) {
        Referrer referrer{range.target, key.sort, state_.entities.at({relation.entity_type(), key.id})};
        if (read == Read::kKeys) referrer.entity.data = nullptr;
        out->push_back(std::move(referrer));
      }
    }
    return Status::Ok();
  }

  Status Count(const Relation& relation, const std::vector<IndexRange>& ranges,
               std::map<std::string, uint64_t>* out) override {
    for (const IndexRange& range : ranges) {
      IndexRange forward = range;
      forward.backward = false;
      (*out)[range.target] = RangeKeys(relation, forward).size();
    }
    return Status::Ok();
  }

  Status ListTargets(const Relation& relation, const std::string& after, size_t limit,
                     std::vector<std::string>* out) override {
    const std::string& type = relation.entity_type();
    for (auto it = state_.index.upper_bound({type, relation.name(), after});
         it != state_.index.end() && std::get<0>(it->first) == type &&
         std::get<1>(it->first) == relation.name() && out->size() < limit;
         ++it) {
      out->push_back(std::get<2>(it->first));
    }
    return Status::Ok();
  }

  // DocumentTables.
  Status Upsert(const ProjectionConfig& projection, const std::vector<DocumentRow>& rows,
                uint64_t* written) override {
    auto& docs = state_.collections[projection.collection];
    for (const DocumentRow& row : rows) {
      MemoryState::Document doc{projection.name, row.pk, row.json};
      auto it = docs.find(row.id);
      if (it != docs.end() && it->second.projection == doc.projection &&
          it->second.pk == doc.pk && SameJson(it->second.json, doc.json)) {
        continue;
      }
      docs[row.id] = doc;
      ++*written;
    }
    return Status::Ok();
  }

  Status Delete(const ProjectionConfig& projection, const std::vector<std::string>& ids,
                uint64_t* deleted) override {
    auto& docs = state_.collections[projection.collection];
    for (const std::string& id : ids) {
      auto it = docs.find(id);
      if (it != docs.end() && it->second.projection == projection.name) {
        docs.erase(it);
        ++*deleted;
      }
    }
    return Status::Ok();
  }

  Status DeleteByPkExcept(const ProjectionConfig& projection, const std::vector<std::string>& pks,
                          const std::vector<std::string>& keep, uint64_t* deleted) override {
    std::set<std::string> kept(keep.begin(), keep.end());
    std::set<std::string> groups(pks.begin(), pks.end());
    auto& docs = state_.collections[projection.collection];
    for (auto it = docs.begin(); it != docs.end();) {
      if (it->second.projection == projection.name && it->second.pk &&
          groups.count(*it->second.pk) && !kept.count(it->first)) {
        it = docs.erase(it);
        ++*deleted;
      } else {
        ++it;
      }
    }
    return Status::Ok();
  }

  Status Load(const ProjectionConfig& projection, const std::vector<std::string>& ids,
              std::vector<DocumentRow>* out) override {
    auto& docs = state_.collections[projection.collection];
    for (const std::string& id : ids) {
      auto it = docs.find(id);
      if (it != docs.end() && it->second.projection == projection.name) {
        out->push_back({id, it->second.pk, it->second.json});
      }
    }
    return Status::Ok();
  }

  Status LoadByPk(const ProjectionConfig& projection, const std::vector<std::string>& pks,
                  std::vector<DocumentRow>* out) override {
    std::set<std::string> wanted(pks.begin(), pks.end());
    for (const auto& entry : state_.collections[projection.collection]) {
      const MemoryState::Document& doc = entry.second;
      if (doc.projection == projection.name && doc.pk && wanted.count(*doc.pk)) {
        out->push_back({entry.first, doc.pk, doc.json});
      }
    }
    return Status::Ok();
  }

  Status ListKeys(const ProjectionConfig& projection, bool by_pk, const std::string& after,
                  size_t limit, std::vector<std::string>* out) override {
    std::set<std::string> keys;
    for (const auto& entry : state_.collections[projection.collection]) {
      if (entry.second.projection != projection.name) continue;
      const std::string* key = by_pk ? (entry.second.pk ? &*entry.second.pk : nullptr)
                                     : &entry.first;
      if (key != nullptr && *key > after) keys.insert(*key);
    }
    for (const std::string& key : keys) {
      if (out->size() >= limit) break;
      out->push_back(key);
    }
    return Status::Ok();
  }

  // StreamLedger.
  Status LoadPositions(const std::string& source, std::vector<StoredPosition>* out) override {
    for (const auto& entry : state_.positions) {
      if (entry.first.first == source) out->push_back(entry.second);
    }
    return Status::Ok();
  }

  Status SavePositions(const std::vector<PositionUpdate>& updates) override {
    for (const PositionUpdate& update : updates) {
      if (!update.expected_previous) continue;
      auto it = state_.positions.find({update.at.source, update.at.partition});
      int64_t stored = it == state_.positions.end() ? -1 : it->second.at.position;
      if (stored != *update.expected_previous) {
        return Status::Conflict(update.at.source + " partition " +
                                std::to_string(update.at.partition) + " is at " +
                                std::to_string(stored) + ", expected " +
                                std::to_string(*update.expected_previous));
      }
    }
    for (const PositionUpdate& update : updates) {
      StoredPosition& stored = state_.positions[{update.at.source, update.at.partition}];
      stored.at = update.at;
      stored.applied += update.applied;
      stored.stale += update.stale;
      stored.dead += update.dead;
    }
    return Status::Ok();
  }

  Status AddDeadLetters(const std::vector<DeadLetter>& letters) override {
    state_.dead_letters.insert(state_.dead_letters.end(), letters.begin(), letters.end());
    return Status::Ok();
  }

 private:
  static bool SameJson(const std::string& a, const std::string& b) {
    if (a == b) return true;
    JsonDocument x, y;
    return ParseJson(a, &x).ok() && ParseJson(b, &y).ok() && JsonEquals(x, y);
  }

  // The keys of a range in ascending order (a backward range's keys before
  // its `from`; a forward range's at or after it).
  std::vector<IndexKey> RangeKeys(const Relation& relation, const IndexRange& range) const {
    std::vector<IndexKey> keys;
    auto it = state_.index.find({relation.entity_type(), relation.name(), range.target});
    if (it == state_.index.end()) return keys;
    for (const IndexKey& key : it->second) {
      if (state_.entities.at({relation.entity_type(), key.id}).deleted) continue;
      const bool in = !range.from || (range.backward ? key < *range.from : !(key < *range.from));
      if (in) keys.push_back(key);
    }
    return keys;
  }

  MemoryStore* store_;
  MemoryState state_;
};

Status MemoryStore::Begin(std::unique_ptr<StoreTransaction>* out) {
  out->reset(new MemoryTransaction(this));
  return Status::Ok();
}

}  // namespace denormd
