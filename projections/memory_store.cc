#include "projections/memory_store.h"

#include <algorithm>
#include <chrono>
#include <functional>

namespace denormd {

class MemoryTransaction : public StoreTransaction,
                          public SourceRows,
                          public ReferenceIndex,
                          public DocumentTables,
                          public StreamLedger,
                          public WriteLocks {
 public:
  explicit MemoryTransaction(MemoryStore* store) : store_(store), state_(store->state_) {
    store_->open_ = true;
    store_->undo_ = &undo_;
  }
  ~MemoryTransaction() override {
    for (auto undo = undo_.rbegin(); undo != undo_.rend(); ++undo) (*undo)();
    store_->open_ = false;
    store_->undo_ = nullptr;
  }

  SourceRows& source() override { return *this; }
  ReferenceIndex& index() override { return *this; }
  DocumentTables& documents() override { return *this; }
  StreamLedger& ledger() override { return *this; }
  WriteLocks& locks() override { return *this; }

  Status Commit() override {
    undo_.clear();
    return Status::Ok();
  }

  void SetChangeSource(const std::string& source) override { source_ = source; }

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
      if (it == state_.entities.end()) continue;
      out->push_back(it->second);
      state_.entities_loaded++;
    }
    return Status::Ok();
  }

  Status WriteEntities(const std::vector<EntityWrite>& writes) override {
    for (const EntityWrite& write : writes) {
      const EntityKey& key = write.record.key;
      Remember(&state_.entities, key);
      Remember(&state_.references, key);
      std::vector<MemoryState::IndexRow>& rows = state_.references[key];
      auto remove = [&](const std::string& relation, const std::string& target,
                        const std::string& sort) {
        if (IndexErase({key.type, relation, target}, {sort, key.id})) state_.index_rows_written++;
        rows.erase(std::remove_if(rows.begin(), rows.end(),
                                  [&](const MemoryState::IndexRow& row) {
                                    return row.relation == relation && row.target == target &&
                                           row.sort == sort;
                                  }),
                   rows.end());
      };
      if (write.replace_all) {
        while (!rows.empty()) remove(rows[0].relation, rows[0].target, rows[0].sort);
      }
      for (const ReferenceRow& row : write.removed) {
        remove(row.relation->name(), row.target, row.sort);
      }
      for (const ReferenceRow& row : write.added) {
        if (IndexInsert({key.type, row.relation->name(), row.target}, {row.sort, key.id})) {
          rows.push_back({row.relation->name(), row.target, row.sort});
          state_.index_rows_written++;
        }
      }
      state_.entities[key] = write.record;
      Remember(&state_.updated_at, key);
      state_.updated_at[key] = Now();
    }
    return Status::Ok();
  }

  // The journal, while an apply is marked (projections/memory_admin.h).
  Status Journal(const std::vector<EntityChange>& changes) override {
    if (state_.model.applying.empty() || changes.empty()) return Status::Ok();
    const size_t size = state_.journal.size();
    undo_.push_back([this, size] { state_.journal.resize(size); });
    for (const EntityChange& change : changes) {
      state_.journal.push_back({change.key, change.before ? *change.before : EntityState(),
                                change.after ? *change.after : EntityState()});
    }
    return Status::Ok();
  }

  Status TakeJournal(size_t limit, std::vector<JournaledChange>* out) override {
    out->clear();
    while (!state_.journal.empty() && (limit == 0 || out->size() < limit)) {
      out->push_back(state_.journal.front());
      state_.journal.pop_front();
    }
    undo_.push_back([this, taken = *out] {
      state_.journal.insert(state_.journal.begin(), taken.begin(), taken.end());
    });
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
      for (const IndexKey& key : RangeKeys(relation, range)) {
        Referrer referrer{range.target, key.sort, state_.entities.at({relation.entity_type(), key.id})};
        if (read == Read::kKeys) referrer.entity.data = nullptr;
        out->push_back(std::move(referrer));
        state_.referrers_read[relation.entity_type() + "." + relation.name()]++;
      }
    }
    return Status::Ok();
  }

  Status Count(const Relation& relation, const std::vector<IndexRange>& ranges,
               std::map<std::string, uint64_t>* out) override {
    for (const IndexRange& range : ranges) {
      auto it = state_.index.find({relation.entity_type(), relation.name(), range.target});
      uint64_t& count = (*out)[range.target];
      count = 0;
      if (it == state_.index.end()) continue;
      count = range.from ? std::distance(it->second.lower_bound(*range.from), it->second.end())
                         : it->second.size();
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

  Status RowsOf(const std::vector<EntityKey>& entities, std::vector<StoredRow>* out) override {
    for (const EntityKey& key : entities) {
      auto it = state_.references.find(key);
      if (it == state_.references.end()) continue;
      for (const MemoryState::IndexRow& row : it->second) {
        out->push_back({key, row.relation, row.target, row.sort});
      }
    }
    return Status::Ok();
  }

  Status RecountTargets() override { return Status::Ok(); }  // counts are the index's sizes

  Status WriteRows(const std::vector<OwnedRows>& writes) override {
    for (const OwnedRows& write : writes) {
      const EntityKey& key = write.owner;
      Remember(&state_.references, key);
      std::vector<MemoryState::IndexRow>& rows = state_.references[key];
      for (const ReferenceRow& row : write.removed) {
        if (!IndexErase({key.type, row.relation->name(), row.target}, {row.sort, key.id})) continue;
        rows.erase(std::remove_if(rows.begin(), rows.end(),
                                  [&](const MemoryState::IndexRow& stored) {
                                    return stored.relation == row.relation->name() &&
                                           stored.target == row.target && stored.sort == row.sort;
                                  }),
                   rows.end());
        state_.index_rows_written++;
      }
      for (const ReferenceRow& row : write.added) {
        if (IndexInsert({key.type, row.relation->name(), row.target}, {row.sort, key.id})) {
          rows.push_back({row.relation->name(), row.target, row.sort});
          state_.index_rows_written++;
        }
      }
    }
    return Status::Ok();
  }

  // DocumentTables.
  Status Upsert(const ProjectionConfig& projection, const std::vector<DocumentRow>& rows,
                uint64_t* written) override {
    auto& docs = state_.collections[projection.collection];
    for (const DocumentRow& row : rows) {
      MemoryState::Document doc{projection.name, row.pk, row.json, row.bucket, row.id};
      const std::string key = DocumentKey(projection, row.id, row.pk);
      auto it = docs.find(key);
      if (it != docs.end() && it->second.projection != doc.projection) {
        return Status::InvalidInput("collection " + projection.collection + ": a document of " +
                                    projection.name + " has the key of document " + row.id +
                                    " (partition " + row.pk.value_or("none") + ") of projection " +
                                    it->second.projection +
                                    " (documents of a shared collection need unique (partition "
                                    "key, id) pairs)");
      }
      if (it != docs.end() && it->second.pk == doc.pk && SameMeta(it->second.bucket, doc.bucket) &&
          SameJson(it->second.json, doc.json)) {
        continue;
      }
      // An entity document whose partition key changed moves to its new key
      // (in the outbox: deleted under the old pk).
      auto old = Find(projection, row.id);
      if (old != docs.end() && old->second.pk != doc.pk) {
        Capture(projection.collection, row.id, old->second.pk, std::nullopt);
      }
      if (old != docs.end() && old->first != key) {
        Remember(&docs, old->first);
        docs.erase(old);
      }
      Capture(projection.collection, row.id, doc.pk, doc.json);
      Remember(&docs, key);
      Remember(&state_.document_writes, projection.collection);
      docs[key] = doc;
      ++*written;
      ++state_.document_writes[projection.collection];
    }
    return Status::Ok();
  }

  Status ProbeBuckets(const ProjectionConfig& projection,
                      const std::vector<std::pair<std::string, IndexKey>>& probes,
                      std::vector<BucketSlot>* out) override {
    for (size_t i = 0; i < probes.size(); ++i) {
      std::vector<BucketSlot> group;  // by lo
      for (const auto& entry : state_.collections[projection.collection]) {
        const MemoryState::Document& doc = entry.second;
        if (doc.projection != projection.name || doc.pk != probes[i].first || !doc.bucket ||
            !doc.bucket->lo) {
          continue;
        }
        group.push_back({i, !(probes[i].second < *doc.bucket->lo), entry.first, *doc.bucket});
      }
      std::sort(group.begin(), group.end(), [](const BucketSlot& a, const BucketSlot& b) {
        return *a.meta.lo < *b.meta.lo;
      });
      size_t split = 0;
      while (split < group.size() && group[split].below) ++split;
      for (size_t k = split >= kProbeWindow ? split - kProbeWindow : 0;
           k < std::min(group.size(), split + kProbeWindow); ++k) {
        out->push_back(group[k]);
      }
    }
    return Status::Ok();
  }

  Status MaxBucketNumbers(const ProjectionConfig& projection,
                          const std::vector<std::string>& groups,
                          std::map<std::string, uint64_t>* out) override {
    std::set<std::string> wanted(groups.begin(), groups.end());
    for (const auto& entry : state_.collections[projection.collection]) {
      const MemoryState::Document& doc = entry.second;
      if (doc.projection != projection.name || !doc.pk || !wanted.count(*doc.pk) || !doc.bucket) {
        continue;
      }
      auto inserted = out->emplace(*doc.pk, doc.bucket->number);
      if (!inserted.second) inserted.first->second = std::max(inserted.first->second, doc.bucket->number);
    }
    return Status::Ok();
  }

  Status RespaceBuckets(const ProjectionConfig& projection, const std::string& group, int64_t after,
                        int64_t before, int64_t step, uint64_t* written) override {
    // (lo, id, document) of the group's buckets below `before` and above `after`.
    std::vector<std::tuple<IndexKey, std::string, MemoryState::Document*>> head, tail;
    for (auto& entry : state_.collections[projection.collection]) {
      MemoryState::Document& doc = entry.second;
      if (doc.projection == projection.name && doc.pk == group && doc.bucket && doc.bucket->lo) {
        if (doc.bucket->seq < before) head.emplace_back(*doc.bucket->lo, entry.first, &doc);
        if (doc.bucket->seq > after) tail.emplace_back(*doc.bucket->lo, entry.first, &doc);
      }
    }
    const bool use_head = head.size() < tail.size();
    auto& buckets = use_head ? head : tail;
    const int64_t first = use_head ? before - static_cast<int64_t>(head.size()) * step : after + step;
    std::sort(buckets.begin(), buckets.end(),
              [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
    auto& docs = state_.collections[projection.collection];
    Remember(&state_.document_writes, projection.collection);
    for (auto& entry : docs) {
      if (entry.second.pk == group) Remember(&docs, entry.first);
    }
    for (size_t rank = 0; rank < buckets.size(); ++rank) {
      MemoryState::Document& doc = *std::get<2>(buckets[rank]);
      doc.bucket->seq = first + static_cast<int64_t>(rank) * step;
      JsonDocument json;
      if (!ParseJson(doc.json, &json).ok()) return Status::Fatal("a stored bucket is not JSON");
      json["seq"].SetInt64(doc.bucket->seq);
      doc.json = ToJson(json);
      Capture(projection.collection, std::get<1>(buckets[rank]), doc.pk, doc.json);
      ++*written;
      ++state_.document_writes[projection.collection];
    }
    return Status::Ok();
  }

  Status Delete(const ProjectionConfig& projection, const std::vector<std::string>& ids,
                uint64_t* deleted) override {
    auto& docs = state_.collections[projection.collection];
    for (const std::string& id : ids) {
      auto it = Find(projection, id);
      if (it != docs.end()) {
        Remember(&docs, it->first);
        Remember(&state_.document_writes, projection.collection);
        Capture(projection.collection, it->second.id, it->second.pk, std::nullopt);
        docs.erase(it);
        ++*deleted;
        ++state_.document_writes[projection.collection];
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
        Remember(&docs, it->first);
        Remember(&state_.document_writes, projection.collection);
        Capture(projection.collection, it->first, it->second.pk, std::nullopt);
        it = docs.erase(it);
        ++*deleted;
        ++state_.document_writes[projection.collection];
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
      auto it = Find(projection, id);
      if (it != docs.end()) out->push_back({id, it->second.pk, it->second.json, it->second.bucket});
    }
    return Status::Ok();
  }

  Status LoadByPk(const ProjectionConfig& projection, const std::vector<std::string>& pks,
                  std::vector<DocumentRow>* out) override {
    std::set<std::string> wanted(pks.begin(), pks.end());
    for (const auto& entry : state_.collections[projection.collection]) {
      const MemoryState::Document& doc = entry.second;
      if (doc.projection == projection.name && doc.pk && wanted.count(*doc.pk)) {
        out->push_back({doc.id, doc.pk, doc.json, doc.bucket});
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
                                     : &entry.second.id;
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
      Remember(&state_.positions, {update.at.source, update.at.partition});
      StoredPosition& stored = state_.positions[{update.at.source, update.at.partition}];
      stored.at = update.at;
      stored.applied += update.applied;
      stored.stale += update.stale;
      stored.dead += update.dead;
    }
    return Status::Ok();
  }

  Status RecordFanOuts(const std::vector<FanOutStat>& stats) override {
    const std::vector<FanOutStat> before = state_.fanouts;
    undo_.push_back([this, before] { state_.fanouts = before; });
    for (const FanOutStat& stat : stats) {
      auto it = std::find_if(state_.fanouts.begin(), state_.fanouts.end(), [&](const FanOutStat& s) {
        return s.type == stat.type && s.field == stat.field;
      });
      if (it == state_.fanouts.end()) {
        state_.fanouts.push_back(stat);
        continue;
      }
      it->Add(stat);
    }
    return Status::Ok();
  }

  Status ReadFanOuts(uint64_t /*within_seconds*/, std::vector<FanOutStat>* out) override {
    *out = state_.fanouts;
    return Status::Ok();
  }

  Status AddDeadLetters(const std::vector<DeadLetter>& letters) override {
    const size_t size = state_.dead_letters.size();
    undo_.push_back([this, size] {
      state_.dead_letters.resize(size);
      state_.dead_letters_received_at.resize(size);
    });
    state_.dead_letters.insert(state_.dead_letters.end(), letters.begin(), letters.end());
    state_.dead_letters_received_at.resize(state_.dead_letters.size(), Now());
    return Status::Ok();
  }

 private:
  // Appends a change to the outbox when `collection` is published; a
  // rollback takes it out again (its seq stays used).
  void Capture(const std::string& collection, const std::string& id,
               const std::optional<std::string>& pk, const std::optional<std::string>& doc) {
    if (!state_.published.count(collection)) return;
    const size_t size = state_.outbox.size();
    undo_.push_back([this, size] { state_.outbox.resize(size); });
    OutboxRow row;
    row.seq = ++state_.outbox_seq;
    row.collection = collection;
    row.id = id;
    row.pk = pk;
    row.doc = doc;
    row.source = source_;
    row.captured_at = Now();
    state_.outbox.push_back(std::move(row));
  }

  static double Now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  static std::string DocumentKey(const ProjectionConfig& projection, const std::string& id,
                                 const std::optional<std::string>& pk) {
    return projection.shared_collection ? pk.value_or("") + '\x1f' + id : id;
  }

  // The document `id` of `projection`, or end().
  std::map<std::string, MemoryState::Document>::iterator Find(const ProjectionConfig& projection,
                                                            const std::string& id) {
    auto& docs = state_.collections[projection.collection];
    if (!projection.shared_collection) {
      auto it = docs.find(id);
      return it != docs.end() && it->second.projection == projection.name ? it : docs.end();
    }
    for (auto it = docs.begin(); it != docs.end(); ++it) {
      if (it->second.id == id && it->second.projection == projection.name) return it;
    }
    return docs.end();
  }

  static bool SameMeta(const std::optional<BucketMeta>& a, const std::optional<BucketMeta>& b) {
    if (!a || !b) return !a && !b;
    return a->number == b->number && a->seq == b->seq && a->lo == b->lo &&
           a->members == b->members && a->member_keys == b->member_keys;
  }

  static bool SameJson(const std::string& a, const std::string& b) {
    if (a == b) return true;
    JsonDocument x, y;
    return ParseJson(a, &x).ok() && ParseJson(b, &y).ok() && JsonEquals(x, y);
  }

  // The keys of a range, in the range's order, at most its limit. The index
  // holds live entities only (tombstones have no rows).
  std::vector<IndexKey> RangeKeys(const Relation& relation, const IndexRange& range) const {
    std::vector<IndexKey> keys;
    auto it = state_.index.find({relation.entity_type(), relation.name(), range.target});
    if (it == state_.index.end()) return keys;
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

  using IndexTarget = std::tuple<std::string, std::string, std::string>;

  // Index rows change one key at a time, journaled one key at a time (a hot
  // target holds thousands of keys).
  bool IndexErase(const IndexTarget& target, const IndexKey& key) {
    auto it = state_.index.find(target);
    if (it == state_.index.end() || it->second.erase(key) == 0) return false;
    if (it->second.empty()) state_.index.erase(it);
    undo_.push_back([this, target, key] { state_.index[target].insert(key); });
    return true;
  }
  bool IndexInsert(const IndexTarget& target, const IndexKey& key) {
    if (!state_.index[target].insert(key).second) return false;
    undo_.push_back([this, target, key] {
      auto it = state_.index.find(target);
      it->second.erase(key);
      if (it->second.empty()) state_.index.erase(it);
    });
    return true;
  }

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

  MemoryStore* store_;
  MemoryState& state_;
  std::vector<std::function<void()>> undo_;
  std::string source_;
};

namespace {

int64_t SeqOf(const std::string& text) { return text.empty() ? 0 : std::stoll(text); }

}  // namespace

// The same walk as PostgresOutbox::Read, with seqs for snapshots: read the
// open window past `after`; when it is exhausted and gave nothing, open the
// next window (through = until, until = the last seq handed out) once.
Status MemoryOutbox::Read(const OutboxCursor& from, size_t max, std::vector<OutboxRow>* rows,
                          OutboxCursor* next) {
  if (store_->transaction_open()) return Status::Busy("a transaction is open");
  const MemoryState& state = store_->state();
  OutboxCursor cursor = from;
  for (int window = 0; window < 2; ++window) {
    if (cursor.until.empty() || window == 1) {
      if (!cursor.until.empty()) cursor.through = cursor.until;
      cursor.until = std::to_string(state.outbox_seq);
      cursor.after = 0;
    }
    const int64_t behind = std::max(SeqOf(cursor.through), cursor.after);
    const int64_t until = SeqOf(cursor.until);
    for (const OutboxRow& row : state.outbox) {
      if (row.seq <= behind || row.seq > until) continue;
      if (rows->size() >= max) break;
      rows->push_back(row);
      cursor.after = row.seq;
    }
    if (!rows->empty()) break;
  }
  *next = cursor;
  return Status::Ok();
}

Status MemoryOutbox::Prune(const OutboxCursor& published, uint64_t sequence) {
  if (store_->transaction_open()) return Status::Busy("a transaction is open");
  MemoryState* state = store_->mutable_state();
  const int64_t through = SeqOf(published.through);
  const int64_t until = SeqOf(published.until);
  auto behind = [&](const OutboxRow& row) {
    return row.seq <= through || (row.seq <= until && row.seq <= published.after);
  };
  state->outbox.erase(std::remove_if(state->outbox.begin(), state->outbox.end(), behind),
                      state->outbox.end());
  state->feed_sequence = sequence;
  return Status::Ok();
}

Status MemoryOutbox::CheckProgress(const OutboxCursor& published, uint64_t sequence,
                                   std::string* problem) {
  problem->clear();
  const MemoryState& state = store_->state();
  const int64_t ahead = std::max(SeqOf(published.through), SeqOf(published.until));
  if (ahead > state.outbox_seq) {
    *problem = "its cursor reaches outbox seq " + std::to_string(ahead) +
               ", past the last the store handed out (" + std::to_string(state.outbox_seq) + ")";
  } else if (sequence < state.feed_sequence) {
    *problem = "its sequence " + std::to_string(sequence) + " is behind the " +
               std::to_string(state.feed_sequence) + " the store recorded as published";
  }
  return Status::Ok();
}

Status MemoryOutbox::Lag(OutboxLag* out) {
  const MemoryState& state = store_->state();
  out->rows = state.outbox.size();
  out->oldest_seconds = 0;
  if (!state.outbox.empty()) {
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    out->oldest_seconds = std::max(0.0, now - state.outbox.front().captured_at);
  }
  return Status::Ok();
}

Status MemoryStore::UndoOnRollback(std::function<void()> undo) {
  if (undo_ == nullptr) return Status::Fatal("internal: no MemoryStore transaction is open");
  undo_->push_back(std::move(undo));
  return Status::Ok();
}

Status MemoryStore::Begin(std::unique_ptr<StoreTransaction>* out) {
  if (open_) return Status::Fatal("a MemoryStore transaction is already open");
  out->reset(new MemoryTransaction(this));
  return Status::Ok();
}

}  // namespace denormd
