#include "projections/buckets/packed_layout.h"

#include <algorithm>
#include <deque>

#include "projections/buckets/bucket_documents.h"

namespace denormd {

namespace {

// Bucket groups whose tails are rebuilt together (each reads a bounded page
// of members at a time).
constexpr size_t kTailGroupsPerChunk = 50;

// A changed member that left (`was_here`: its key before the batch) or
// entered (its key now) a place in the group: the tail from there on moves.
void AddTailChange(const IndexKey& key, bool was_here, BucketBound* bound) {
  if (was_here) {
    bound->old_keys.push_back(key);
  } else {
    bound->fresh_ids.insert(key.id);
  }
  if (!bound->has_tail || key < bound->tail) {
    bound->has_tail = true;
    bound->tail = key;
  }
}

// One group's members in a page of a tail read, in order, without the member
// that a continued group re-reads as its page's start; `more` when the
// group's tail goes on (its next page then starts at the last member).
struct TailPage {
  std::vector<const Referrer*> members;
  bool more = false;
};

std::map<std::string, TailPage> SplitTailPage(const std::vector<Referrer>& loaded,
                                              const std::map<std::string, ReadStart>& pending,
                                              const std::set<std::string>& continued,
                                              uint64_t page_rows,
                                              std::map<std::string, ReadStart>* next_pending) {
  std::map<std::string, std::vector<const Referrer*>> by_group = GroupByTarget(loaded);
  std::map<std::string, TailPage> pages;
  for (const auto& entry : pending) {
    const std::string& group = entry.first;
    std::vector<const Referrer*>& members = by_group[group];
    uint64_t forward = 0;
    for (const Referrer* m : members) forward += m->key() < entry.second.key ? 0 : 1;
    TailPage& page = pages[group];
    page.more = forward >= page_rows;
    if (page.more) (*next_pending)[group] = {members.back()->key(), 0};
    size_t skip = continued.count(group) && !members.empty() ? 1 : 0;
    page.members.assign(members.begin() + skip, members.end());
  }
  return pages;
}

// One group's tail being spliced: the stored buckets from the tail's first
// one on hold the items of the members before the batch, in order; walking
// the members now in order, an unchanged member takes the next stored item,
// a changed member's old item is dropped where its old key falls, and a
// changed member's new item is rendered from its entity.
struct TailSplice {
  uint64_t old_total = 0;    // members before the batch
  uint64_t old_buckets = 0;  // buckets stored before the batch
  uint64_t next_old = 0;     // the next stored bucket to read
  std::deque<std::string> old_items;  // read, not yet taken
  std::vector<IndexKey> old_keys;     // of changed members, in the tail, sorted
  size_t next_old_key = 0;
  bool started = false;  // old_keys trimmed to the tail
  bool sampled = false;  // one unchanged item compared with its entity
  std::vector<std::string> pool;  // items of buckets not yet emitted
  TailPage page;                  // the members of this round
  uint64_t read_to = 0;  // stored buckets [next_old, read_to) are read this page

  // How many items stored bucket `n` held before the batch.
  uint64_t StoredItems(uint64_t n, uint64_t size) const {
    return n + 1 < old_buckets ? size : old_total - (old_buckets - 1) * size;
  }

  bool TakeOldItem(std::string* item) {
    if (old_items.empty()) return false;
    *item = std::move(old_items.front());
    old_items.pop_front();
    return true;
  }

  // Drops the stored items of the changed members whose old key is at or
  // before `key` (all that are left when `key` is null). False when the
  // stored buckets ran out first.
  bool DropOldItemsThrough(const IndexKey* key) {
    for (; next_old_key < old_keys.size() && (key == nullptr || old_keys[next_old_key] <= *key);
         ++next_old_key) {
      if (old_items.empty()) return false;
      old_items.pop_front();
    }
    return true;
  }
};

// Members before the batch, from the members now and the batch's changes.
bool OldTotal(const BucketBound& bound, uint64_t total, uint64_t* out) {
  std::set<std::string> old_ids;
  for (const IndexKey& key : bound.old_keys) old_ids.insert(key.id);
  uint64_t entered = 0, left = 0;
  for (const std::string& id : bound.fresh_ids) entered += old_ids.count(id) ? 0 : 1;
  for (const std::string& id : old_ids) left += bound.fresh_ids.count(id) ? 0 : 1;
  if (total + left < entered) return false;
  *out = total + left - entered;
  return true;
}

bool SameItem(const std::string& a, const std::string& b) {
  JsonDocument x, y;
  return ParseJson(a, &x).ok() && ParseJson(b, &y).ok() && JsonEquals(x, y);
}

}  // namespace

std::map<std::string, BucketBound> PackedBounds(const GroupChanges& changes) {
  std::map<std::string, BucketBound> bounds;
  for (const auto& group : changes) {
    BucketBound& bound = bounds[group.first];
    for (const MemberChange& change : group.second) {
      if (change.before && change.after && *change.before == *change.after) {
        if (!change.item_changed) continue;
        bound.old_keys.push_back(*change.after);
        bound.fresh_ids.insert(change.id);
        bound.points.push_back(*change.after);
        continue;
      }
      if (change.before) AddTailChange(*change.before, /*was_here=*/true, &bound);
      if (change.after) AddTailChange(*change.after, /*was_here=*/false, &bound);
    }
  }
  return bounds;
}

// Splices the tails of a set of groups, page by page (see the file comment
// of packed_layout.h). Groups whose stored buckets do not fit are left in
// *unspliced for RenderTails.
class PackedLayout::TailSplicer {
 public:
  TailSplicer(const PackedLayout& layout, StoreTransaction& txn,
              const std::map<std::string, BucketBound>& bounds,
              std::map<std::string, uint64_t>& total, std::map<std::string, uint64_t>* next_bucket,
              const Emit& emit, std::set<std::string>* unspliced)
      : projection_(layout.projection_),
        relation_(layout.relation_),
        page_rows_(std::max<uint64_t>(layout.page_rows_, layout.projection_.size)),
        txn_(txn),
        bounds_(bounds),
        total_(total),
        next_bucket_(*next_bucket),
        emit_(emit),
        unspliced_(*unspliced) {}

  Status Run(std::map<std::string, ReadStart> pending) {
    if (!BucketItemsReadable(projection_)) {
      for (const auto& entry : pending) unspliced_.insert(entry.first);
      return Status::Ok();
    }
    Start(&pending);
    std::set<std::string> continued;  // groups whose page re-reads the last member
    while (!pending.empty()) {
      std::vector<Referrer> loaded;
      DENORMD_RETURN_IF_ERROR(ReadAround(txn_.index(), relation_, pending, page_rows_,
                                         ReferenceIndex::Read::kKeys, &loaded));
      std::map<std::string, ReadStart> next_pending;
      std::map<std::string, TailPage> pages =
          SplitTailPage(loaded, pending, continued, page_rows_, &next_pending);
      std::vector<std::string> document_ids;
      std::vector<EntityKey> entity_keys;
      for (const auto& entry : pending) {
        splices_[entry.first].page = std::move(pages[entry.first]);
        PlanGroupPage(entry.first, &document_ids, &entity_keys);
      }
      DENORMD_RETURN_IF_ERROR(ReadPage(document_ids, entity_keys));
      std::vector<DocumentRow> rows;
      for (const auto& entry : pending) {
        if (!SpliceGroupPage(entry.first, &rows)) {
          unspliced_.insert(entry.first);
          next_pending.erase(entry.first);
        }
      }
      if (!rows.empty()) DENORMD_RETURN_IF_ERROR(emit_(&rows));
      continued.clear();
      for (const auto& entry : next_pending) continued.insert(entry.first);
      pending = std::move(next_pending);
    }
    return Status::Ok();
  }

 private:
  // The stored shape of each group before the batch; groups whose member
  // count does not add up are left to rendering.
  void Start(std::map<std::string, ReadStart>* pending) {
    const uint64_t size = projection_.size;
    for (auto it = pending->begin(); it != pending->end();) {
      const BucketBound& bound = bounds_.at(it->first);
      TailSplice& splice = splices_[it->first];
      if (!OldTotal(bound, total_[it->first], &splice.old_total)) {
        unspliced_.insert(it->first);
        splices_.erase(it->first);
        it = pending->erase(it);
        continue;
      }
      splice.old_buckets = (splice.old_total + size - 1) / size;
      splice.next_old = next_bucket_[it->first];
      splice.old_keys = bound.old_keys;
      std::sort(splice.old_keys.begin(), splice.old_keys.end());
      ++it;
    }
  }

  // What one group's page needs read: the entities of its changed members
  // (and of one sample), and every stored bucket it takes items from or may
  // overwrite.
  void PlanGroupPage(const std::string& group, std::vector<std::string>* document_ids,
                     std::vector<EntityKey>* entity_keys) {
    const BucketBound& bound = bounds_.at(group);
    TailSplice& splice = splices_[group];
    const std::vector<const Referrer*>& members = splice.page.members;
    if (!splice.started) {
      // The tail starts at its first member (before the bound when the
      // bound's bucket has earlier members) or at the bound.
      IndexKey start = bound.tail;
      if (!members.empty()) start = std::min(start, members.front()->key());
      splice.old_keys.erase(
          splice.old_keys.begin(),
          std::lower_bound(splice.old_keys.begin(), splice.old_keys.end(), start));
      splice.started = true;
    }
    // Stored items this page takes: one per unchanged member, one per old
    // key passed.
    uint64_t needed = 0;
    for (const Referrer* m : members) {
      if (bound.fresh_ids.count(m->entity.key.id)) {
        entity_keys->push_back(m->entity.key);
      } else if (++needed == 1 && !splice.sampled) {
        entity_keys->push_back(m->entity.key);  // the sample
      }
    }
    size_t keys_passed = splice.old_keys.size();
    if (splice.page.more && !members.empty()) {
      const IndexKey last = members.back()->key();
      keys_passed = std::upper_bound(splice.old_keys.begin(), splice.old_keys.end(), last) -
                    splice.old_keys.begin();
    }
    needed += keys_passed - std::min(keys_passed, splice.next_old_key);
    const uint64_t size = projection_.size;
    const uint64_t emitted_to =
        next_bucket_[group] + (splice.pool.size() + members.size() + size - 1) / size;
    uint64_t available = splice.old_items.size();
    splice.read_to = splice.next_old;
    while (splice.read_to < splice.old_buckets &&
           (available < needed || splice.read_to < emitted_to)) {
      available += splice.StoredItems(splice.read_to, size);
      document_ids->push_back(BucketDocumentId(group, splice.read_to));
      ++splice.read_to;
    }
  }

  Status ReadPage(const std::vector<std::string>& document_ids,
                  const std::vector<EntityKey>& entity_keys) {
    stored_.clear();
    stored_by_id_.clear();
    records_.clear();
    entities_.clear();
    if (!document_ids.empty()) {
      DENORMD_RETURN_IF_ERROR(txn_.documents().Load(projection_, document_ids, &stored_));
    }
    for (const DocumentRow& row : stored_) stored_by_id_[row.id] = &row;
    if (!entity_keys.empty()) {
      DENORMD_RETURN_IF_ERROR(txn_.source().LoadEntities(entity_keys, &records_));
    }
    for (const EntityRecord& record : records_) {
      if (record.live()) entities_[record.key.id] = &record;
    }
    return Status::Ok();
  }

  // Splices one group's page into complete buckets. False when its stored
  // buckets do not fit.
  bool SpliceGroupPage(const std::string& group, std::vector<DocumentRow>* rows) {
    TailSplice& splice = splices_[group];
    if (!TakeStoredBuckets(group, &splice)) return false;
    for (const Referrer* m : splice.page.members) {
      std::string item;
      if (!TakeItem(group, *m, &splice, &item)) return false;
      splice.pool.push_back(std::move(item));
    }
    if (!splice.page.more) {
      // The tail's end: the old keys left are members that left it, and
      // every stored item and bucket has been taken.
      if (!splice.DropOldItemsThrough(nullptr) || !splice.old_items.empty() ||
          splice.next_old != splice.old_buckets) {
        return false;
      }
    }
    const uint64_t size = projection_.size;
    const size_t complete = splice.page.more ? splice.pool.size() / size * size : splice.pool.size();
    AppendPackedBuckets(projection_, group, next_bucket_[group], splice.pool, complete, rows);
    next_bucket_[group] += (complete + size - 1) / size;
    splice.pool.erase(splice.pool.begin(), splice.pool.begin() + complete);
    return true;
  }

  // Moves the items of the stored buckets read for this page into the pool
  // of old items, checking each bucket's size.
  bool TakeStoredBuckets(const std::string& group, TailSplice* splice) {
    for (; splice->next_old < splice->read_to; ++splice->next_old) {
      auto found = stored_by_id_.find(BucketDocumentId(group, splice->next_old));
      std::vector<std::string> items;
      if (found == stored_by_id_.end() ||
          !SplitArrayField(found->second->json, projection_.field, &items) ||
          items.size() != splice->StoredItems(splice->next_old, projection_.size)) {
        return false;
      }
      for (std::string& item : items) splice->old_items.push_back(std::move(item));
    }
    return true;
  }

  // The item of member `m` now: rendered when the batch changed it, else
  // the stored one (the first such is checked against its entity).
  bool TakeItem(const std::string& group, const Referrer& m, TailSplice* splice,
                std::string* item) {
    const IndexKey key = m.key();
    if (!splice->DropOldItemsThrough(&key)) return false;
    if (bounds_.at(group).fresh_ids.count(m.entity.key.id)) {
      auto entity = entities_.find(m.entity.key.id);
      if (entity == entities_.end()) return false;
      *item = RenderItem(projection_, *entity->second);
      return true;
    }
    if (!splice->TakeOldItem(item)) return false;
    if (splice->sampled) return true;
    // A changed `select` (or an edited document) shows here: the stored
    // item must be what the member renders to now.
    splice->sampled = true;
    auto entity = entities_.find(m.entity.key.id);
    return entity != entities_.end() && SameItem(*item, RenderItem(projection_, *entity->second));
  }

  const ProjectionConfig& projection_;
  const Relation& relation_;
  const uint64_t page_rows_;
  StoreTransaction& txn_;
  const std::map<std::string, BucketBound>& bounds_;
  std::map<std::string, uint64_t>& total_;
  std::map<std::string, uint64_t>& next_bucket_;
  const Emit& emit_;
  std::set<std::string>& unspliced_;
  std::map<std::string, TailSplice> splices_;
  // This page's reads.
  std::vector<DocumentRow> stored_;
  std::map<std::string, const DocumentRow*> stored_by_id_;
  std::vector<EntityRecord> records_;
  std::map<std::string, const EntityRecord*> entities_;
};

Status PackedLayout::ApplyChanges(StoreTransaction& txn, const GroupChanges& changes,
                                  BatchStats* stats) const {
  const std::map<std::string, BucketBound> all = PackedBounds(changes);
  const Emit emit = [&](std::vector<DocumentRow>* rows) {
    return txn.documents().Upsert(projection_, *rows, &stats->documents_written);
  };
  for (auto chunk_start = all.begin(); chunk_start != all.end();) {
    std::map<std::string, BucketBound> bounds;
    for (; chunk_start != all.end() && bounds.size() < kTailGroupsPerChunk; ++chunk_start) {
      bounds.insert(*chunk_start);
    }
    std::vector<std::string> groups, keep;  // groups whose membership changed
    for (const auto& bound : bounds) {
      if (bound.second.has_tail) groups.push_back(bound.first);
    }
    uint64_t rendered = 0;
    DENORMD_RETURN_IF_ERROR(BuildTails(txn, bounds, emit, &keep, &rendered));
    if (!groups.empty()) {
      DENORMD_RETURN_IF_ERROR(txn.documents().DeleteByPkExcept(projection_, groups, keep,
                                                               &stats->documents_deleted));
    }
    stats->units_recomputed += bounds.size();
    stats->tails_spliced += groups.size() - rendered;
    stats->tails_rendered += rendered;
  }
  return Status::Ok();
}

Status PackedLayout::BuildTails(StoreTransaction& txn,
                                const std::map<std::string, BucketBound>& bounds,
                                const Emit& emit, std::vector<std::string>* keep,
                                uint64_t* rendered) const {
  // rank of the bound = members - members at or after it: both are cheap (a
  // counter row, and an index range as long as the changed tail).
  std::vector<std::string> groups;
  std::map<std::string, IndexKey> tail_keys;
  for (const auto& bound : bounds) {
    groups.push_back(bound.first);
    if (bound.second.has_tail) tail_keys[bound.first] = bound.second.tail;
  }
  std::map<std::string, uint64_t> total, from, next_bucket;
  DENORMD_RETURN_IF_ERROR(CountReferrers(txn.index(), relation_, groups, &total));
  DENORMD_RETURN_IF_ERROR(CountReferrersFrom(txn.index(), relation_, tail_keys, &from));
  std::map<std::string, ReadStart> tails;
  for (const auto& key : tail_keys) {
    const uint64_t rank = total[key.first] - std::min(total[key.first], from[key.first]);
    next_bucket[key.first] = rank / projection_.size;
    tails[key.first] = {key.second, rank - next_bucket[key.first] * projection_.size};
  }
  const std::map<std::string, uint64_t> first_bucket = next_bucket;
  std::set<std::string> unspliced;
  TailSplicer splicer(*this, txn, bounds, total, &next_bucket, emit, &unspliced);
  DENORMD_RETURN_IF_ERROR(splicer.Run(tails));
  *rendered = unspliced.size();
  if (!unspliced.empty()) {
    // From their first changed bucket again: what the splice wrote of them
    // is overwritten.
    std::map<std::string, ReadStart> rest;
    for (const std::string& group : unspliced) {
      rest[group] = tails[group];
      next_bucket[group] = first_bucket.at(group);
    }
    DENORMD_RETURN_IF_ERROR(RenderTails(txn, rest, &next_bucket, emit));
  }
  for (const auto& entry : next_bucket) {
    for (uint64_t n = 0; n < entry.second; ++n) keep->push_back(BucketDocumentId(entry.first, n));
  }
  return BuildPointBuckets(txn, bounds, total, emit);
}

Status PackedLayout::RenderTails(StoreTransaction& txn, std::map<std::string, ReadStart> pending,
                                 std::map<std::string, uint64_t>* next_bucket,
                                 const Emit& emit) const {
  // A page's last member is re-read as the (inclusive) start of the next.
  const uint64_t page = std::max<uint64_t>(page_rows_, projection_.size);
  std::map<std::string, std::vector<Referrer>> carry;  // members of an unfinished bucket
  std::set<std::string> continued;
  while (!pending.empty()) {
    std::vector<Referrer> loaded;
    DENORMD_RETURN_IF_ERROR(ReadAround(txn.index(), relation_, pending, page,
                                       ReferenceIndex::Read::kKeysAndData, &loaded));
    std::map<std::string, ReadStart> next_pending;
    std::map<std::string, TailPage> pages =
        SplitTailPage(loaded, pending, continued, page, &next_pending);
    std::vector<DocumentRow> rows;
    for (const auto& entry : pages) {
      const std::string& group = entry.first;
      std::vector<Referrer>& pool = carry[group];
      for (const Referrer* member : entry.second.members) pool.push_back(*member);
      const size_t complete =
          entry.second.more ? pool.size() / projection_.size * projection_.size : pool.size();
      std::vector<const Referrer*> done;
      for (size_t i = 0; i < complete; ++i) done.push_back(&pool[i]);
      AppendPackedMemberBuckets(projection_, group, (*next_bucket)[group], done, &rows);
      (*next_bucket)[group] += (complete + projection_.size - 1) / projection_.size;
      pool.erase(pool.begin(), pool.begin() + complete);
    }
    if (!rows.empty()) DENORMD_RETURN_IF_ERROR(emit(&rows));
    continued.clear();
    for (const auto& entry : next_pending) continued.insert(entry.first);
    pending = std::move(next_pending);
  }
  return Status::Ok();
}

Status PackedLayout::BuildPointBuckets(StoreTransaction& txn,
                                       const std::map<std::string, BucketBound>& bounds,
                                       std::map<std::string, uint64_t>& total,
                                       const Emit& emit) const {
  // Points a tail does not cover, per group, in order.
  std::map<std::string, std::vector<IndexKey>> points;
  for (const auto& bound : bounds) {
    for (const IndexKey& point : bound.second.points) {
      if (bound.second.has_tail && !(point < bound.second.tail)) continue;
      points[bound.first].push_back(point);
    }
    std::sort(points[bound.first].begin(), points[bound.first].end());
  }
  // Round k rewrites the bucket of each group's k-th point (skipping points
  // whose bucket an earlier round already wrote).
  std::map<std::string, std::set<uint64_t>> written;
  for (size_t k = 0;; ++k) {
    std::map<std::string, IndexKey> round;
    for (const auto& entry : points) {
      if (k < entry.second.size()) round[entry.first] = entry.second[k];
    }
    if (round.empty()) return Status::Ok();
    std::map<std::string, uint64_t> from;
    DENORMD_RETURN_IF_ERROR(CountReferrersFrom(txn.index(), relation_, round, &from));
    std::map<std::string, uint64_t> bucket_of;
    std::map<std::string, ReadStart> starts;
    for (const auto& entry : round) {
      const std::string& group = entry.first;
      const uint64_t rank = total[group] - std::min(total[group], from[group]);
      const uint64_t bucket = rank / projection_.size;
      if (!written[group].insert(bucket).second) continue;
      bucket_of[group] = bucket;
      starts[group] = {entry.second, rank - bucket * projection_.size};
    }
    std::vector<Referrer> loaded;
    DENORMD_RETURN_IF_ERROR(ReadAround(txn.index(), relation_, starts, projection_.size,
                                       ReferenceIndex::Read::kKeysAndData, &loaded));
    std::map<std::string, std::vector<const Referrer*>> by_group = GroupByTarget(loaded);
    std::vector<DocumentRow> rows;
    for (const auto& entry : starts) {
      std::vector<const Referrer*>& members = by_group[entry.first];
      if (members.size() > projection_.size) members.resize(projection_.size);
      AppendPackedMemberBuckets(projection_, entry.first, bucket_of[entry.first], members, &rows);
    }
    if (!rows.empty()) DENORMD_RETURN_IF_ERROR(emit(&rows));
  }
}

Status PackedLayout::BuildGroups(StoreTransaction& txn, const std::vector<std::string>& groups,
                                 std::map<std::string, std::vector<DocumentRow>>* out) const {
  std::vector<Referrer> members;
  DENORMD_RETURN_IF_ERROR(ReadReferrers(txn.index(), relation_, groups,
                                        ReferenceIndex::Read::kKeysAndData, &members));
  std::map<std::string, std::vector<const Referrer*>> by_group = GroupByTarget(members);
  for (const std::string& group : groups) {
    std::vector<DocumentRow>& rows = (*out)[group];
    rows.clear();
    AppendPackedMemberBuckets(projection_, group, 0, by_group[group], &rows);
  }
  return Status::Ok();
}

}  // namespace denormd
