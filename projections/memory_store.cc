#include "projections/memory_store.h"

#include <algorithm>
#include <tuple>

namespace denormd {

class MemoryTransaction : public StoreTransaction {
 public:
  explicit MemoryTransaction(MemoryStore* store) : store_(store), state_(store->state_) {}

  Status LockWriters(bool exclusive) override { return Status::Ok(); }
  Status LockKeys(const std::vector<std::string>& keys, LockMode mode) override {
    return Status::Ok();
  }

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
      for (const ReferenceRow& row : state_.references[key]) {
        auto it = state_.index.find({key.type, row.relation, row.target});
        if (it != state_.index.end()) {
          it->second.erase({row.sort, key.id});
          if (it->second.empty()) state_.index.erase(it);
        }
      }
      state_.references[key] = write.references;
      for (const ReferenceRow& row : write.references) {
        state_.index[{key.type, row.relation, row.target}].insert({row.sort, key.id});
      }
      state_.entities[key] = write.record;
    }
    return Status::Ok();
  }

  Status FindReferrers(const std::string& type, const std::string& field,
                       const std::vector<std::string>& targets,
                       std::vector<Referrer>* out) override {
    return Referrers(type, field, targets, /*with_data=*/false, out);
  }

  Status LoadReferrers(const std::string& type, const std::string& field,
                       const std::vector<std::string>& targets,
                       std::vector<Referrer>* out) override {
    return Referrers(type, field, targets, /*with_data=*/true, out);
  }

  Status CountReferrers(const std::string& type, const std::string& relation,
                        const std::vector<std::string>& targets,
                        std::map<std::string, uint64_t>* out) override {
    std::vector<Referrer> all;
    DENORMD_RETURN_IF_ERROR(Referrers(type, relation, targets, false, &all));
    for (const Referrer& r : all) (*out)[r.target]++;
    return Status::Ok();
  }

  Status LoadFirstReferrers(const std::string& type, const std::string& relation,
                            const std::vector<std::string>& targets, uint64_t limit,
                            std::vector<Referrer>* out) override {
    std::set<std::string> unique(targets.begin(), targets.end());
    for (const std::string& target : unique) {
      std::vector<Referrer> all = Ordered(type, relation, target);
      if (all.size() > limit) all.resize(limit);
      for (Referrer& r : all) out->push_back(std::move(r));
    }
    return Status::Ok();
  }

  Status CountReferrersFrom(const std::string& type, const std::string& relation,
                            const std::map<std::string, ReferrerBound>& bounds,
                            std::map<std::string, uint64_t>* out) override {
    for (const auto& bound : bounds) {
      uint64_t& count = (*out)[bound.first];
      count = 0;
      for (const Referrer& r : Ordered(type, relation, bound.first)) {
        if (std::tie(r.sort, r.entity.key.id) >= std::tie(bound.second.sort, bound.second.id)) {
          ++count;
        }
      }
    }
    return Status::Ok();
  }

  Status LoadReferrersAround(const std::string& type, const std::string& relation,
                             const std::map<std::string, ReferrerBound>& bounds, uint64_t limit,
                             std::vector<Referrer>* out) override {
    for (const auto& bound : bounds) {
      std::vector<Referrer> all = Ordered(type, relation, bound.first);
      size_t first = 0;
      while (first < all.size() && std::tie(all[first].sort, all[first].entity.key.id) <
                                       std::tie(bound.second.sort, bound.second.id)) {
        ++first;
      }
      size_t end = limit == 0 ? all.size() : std::min<size_t>(all.size(), first + limit);
      first -= std::min<size_t>(first, bound.second.before);
      for (size_t i = first; i < end; ++i) out->push_back(std::move(all[i]));
    }
    return Status::Ok();
  }

  Status FindReferrersAround(const std::string& type, const std::string& relation,
                             const std::map<std::string, ReferrerBound>& bounds, uint64_t limit,
                             std::vector<Referrer>* out) override {
    size_t first = out->size();
    DENORMD_RETURN_IF_ERROR(LoadReferrersAround(type, relation, bounds, limit, out));
    for (size_t i = first; i < out->size(); ++i) (*out)[i].entity.data = nullptr;
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

  Status ListReferenceTargets(const std::string& type, const std::string& relation,
                              const std::string& after, size_t limit,
                              std::vector<std::string>* out) override {
    for (auto it = state_.index.upper_bound({type, relation, after});
         it != state_.index.end() && std::get<0>(it->first) == type &&
         std::get<1>(it->first) == relation && out->size() < limit;
         ++it) {
      out->push_back(std::get<2>(it->first));
    }
    return Status::Ok();
  }

  Status UpsertDocuments(const std::string& collection, const std::string& projection,
                         const std::vector<DocumentRow>& rows, uint64_t* written) override {
    auto& docs = state_.collections[collection];
    for (const DocumentRow& row : rows) {
      MemoryState::Document doc{projection, row.pk, row.json};
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

  Status DeleteDocuments(const std::string& collection, const std::string& projection,
                         const std::vector<std::string>& ids, uint64_t* deleted) override {
    auto& docs = state_.collections[collection];
    for (const std::string& id : ids) {
      auto it = docs.find(id);
      if (it != docs.end() && it->second.projection == projection) {
        docs.erase(it);
        ++*deleted;
      }
    }
    return Status::Ok();
  }

  Status DeleteDocumentsExcept(const std::string& collection, const std::string& projection,
                               const std::vector<std::string>& pks,
                               const std::vector<std::string>& keep,
                               uint64_t* deleted) override {
    std::set<std::string> kept(keep.begin(), keep.end());
    std::set<std::string> groups(pks.begin(), pks.end());
    auto& docs = state_.collections[collection];
    for (auto it = docs.begin(); it != docs.end();) {
      if (it->second.projection == projection && it->second.pk &&
          groups.count(*it->second.pk) && !kept.count(it->first)) {
        it = docs.erase(it);
        ++*deleted;
      } else {
        ++it;
      }
    }
    return Status::Ok();
  }

  Status LoadDocuments(const std::string& collection, const std::string& projection,
                       const std::vector<std::string>& ids,
                       std::vector<DocumentRow>* out) override {
    auto& docs = state_.collections[collection];
    for (const std::string& id : ids) {
      auto it = docs.find(id);
      if (it != docs.end() && it->second.projection == projection) {
        out->push_back({id, it->second.pk, it->second.json});
      }
    }
    return Status::Ok();
  }

  Status LoadDocumentsByPk(const std::string& collection, const std::string& projection,
                           const std::vector<std::string>& pks,
                           std::vector<DocumentRow>* out) override {
    std::set<std::string> wanted(pks.begin(), pks.end());
    for (const auto& entry : state_.collections[collection]) {
      const MemoryState::Document& doc = entry.second;
      if (doc.projection == projection && doc.pk && wanted.count(*doc.pk)) {
        out->push_back({entry.first, doc.pk, doc.json});
      }
    }
    return Status::Ok();
  }

  Status ListDocumentKeys(const std::string& collection, const std::string& projection,
                          bool by_pk, const std::string& after, size_t limit,
                          std::vector<std::string>* out) override {
    std::set<std::string> keys;
    for (const auto& entry : state_.collections[collection]) {
      if (entry.second.projection != projection) continue;
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

  Status Commit() override {
    if (!store_->fail_next_commit_.ok()) {
      Status failure = store_->fail_next_commit_;
      store_->fail_next_commit_ = Status::Ok();
      return failure;
    }
    store_->state_ = std::move(state_);
    return Status::Ok();
  }

 private:
  static bool SameJson(const std::string& a, const std::string& b) {
    if (a == b) return true;
    JsonDocument x, y;
    return ParseJson(a, &x).ok() && ParseJson(b, &y).ok() && JsonEquals(x, y);
  }

  // The live referrers of one target in (sort, id) order, with data.
  std::vector<Referrer> Ordered(const std::string& type, const std::string& relation,
                                const std::string& target) {
    std::vector<Referrer> out;
    auto it = state_.index.find({type, relation, target});
    if (it == state_.index.end()) return out;
    for (const auto& entry : it->second) {
      const EntityRecord& record = state_.entities.at({type, entry.second});
      if (!record.deleted) out.push_back({target, entry.first, record});
    }
    return out;
  }

  Status Referrers(const std::string& type, const std::string& field,
                   const std::vector<std::string>& targets, bool with_data,
                   std::vector<Referrer>* out) {
    std::set<std::string> unique(targets.begin(), targets.end());
    for (const std::string& target : unique) {
      for (Referrer& referrer : Ordered(type, field, target)) {
        if (!with_data) referrer.entity.data = nullptr;
        out->push_back(std::move(referrer));
      }
    }
    return Status::Ok();
  }

  MemoryStore* store_;
  MemoryState state_;
};

Status MemoryStore::Begin(std::unique_ptr<StoreTransaction>* out) {
  out->reset(new MemoryTransaction(this));
  return Status::Ok();
}

}  // namespace denormd
