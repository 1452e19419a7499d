#include "projections/batch_applier.h"

#include <algorithm>
#include <optional>
#include <tuple>

namespace denormd {

namespace {

constexpr size_t kUnitsPerChunk = 1000;
constexpr int kAttemptsBeforeExclusive = 3;
// Bucket groups whose tails are rebuilt together (each reads a bounded page
// of members at a time).
constexpr size_t kTailGroupsPerChunk = 50;

std::string StreamKey(const SourcePosition& at) {
  return at.source + '\x1f' + std::to_string(at.partition);
}

bool SameRecord(const std::optional<EntityRecord>& a, const std::optional<EntityRecord>& b) {
  if (!a || !b) return !a && !b;
  if (a->deleted != b->deleted || a->version != b->version) return false;
  if (!a->data || !b->data) return !a->data && !b->data;
  return JsonEquals(*a->data, *b->data);
}

bool IsLive(const std::optional<EntityRecord>& record) {
  return record && !record->deleted && record->data;
}

// True when what a relation sees of the entity differs between the states:
// the selection it copies, or its place in the order (the sort key). Equal
// views need no recompute of the documents that embed or look it up.
bool ViewChanged(const Selection& selection, const OrderBy* order_by,
                 const std::optional<EntityRecord>& before,
                 const std::optional<EntityRecord>& after) {
  bool live_before = IsLive(before), live_after = IsLive(after);
  if (live_before != live_after) return true;
  if (!live_before) return false;
  if (SortKey(order_by, before->key.id, *before->data) !=
      SortKey(order_by, after->key.id, *after->data)) {
    return true;
  }
  JsonDocument a, b;
  ApplySelection(selection, before->key.id, *before->data, &a, a.GetAllocator());
  ApplySelection(selection, after->key.id, *after->data, &b, b.GetAllocator());
  return !JsonEquals(a, b);
}

std::vector<std::string> TargetsOf(const Path& path, const std::optional<EntityRecord>& record) {
  if (!IsLive(record)) return {};
  return ReferenceTargets(path, record->key.id, *record->data);
}

// The group of an entity in a bucket projection: only a string value groups.
std::optional<std::string> GroupOf(const Path& by, const std::optional<EntityRecord>& record) {
  if (!IsLive(record)) return std::nullopt;
  return StringAt(by, record->key.id, *record->data);
}

// A changed member that left (`was_here`: its key before the batch) or
// entered (its key now) a place in the group: the group's tail from there on
// is rebuilt.
void LowerBound(std::string sort, const std::string& id, bool was_here,
                std::map<std::string, BucketBound>* bounds, const std::string& group) {
  auto inserted = bounds->emplace(group, BucketBound());
  BucketBound& bound = inserted.first->second;
  if (was_here) {
    bound.old_keys.emplace_back(sort, id);
  } else {
    bound.fresh_ids.insert(id);
  }
  if (inserted.second || !bound.has_tail ||
      std::tie(sort, id) < std::tie(bound.sort, bound.id)) {
    bound.has_tail = true;
    bound.sort = std::move(sort);
    bound.id = id;
  }
}

// A member that stays in place: only its own bucket changes.
void AddPoint(std::string sort, const std::string& id, std::map<std::string, BucketBound>* bounds,
              const std::string& group) {
  auto it = bounds->find(group);
  if (it == bounds->end()) {
    BucketBound bound;
    bound.has_tail = false;
    it = bounds->emplace(group, std::move(bound)).first;
  }
  it->second.old_keys.emplace_back(sort, id);
  it->second.fresh_ids.insert(id);
  it->second.points.emplace_back(std::move(sort), id);
}

std::string Truncate(const std::string& text, size_t max = 300) {
  return text.size() <= max ? text : text.substr(0, max) + "...";
}

}  // namespace

std::string EntityLockKey(const std::string& type, const std::string& id) {
  return "e\x1f" + type + '\x1f' + id;
}

std::string GroupLockKey(const std::string& projection, const std::string& group) {
  return "g\x1f" + projection + '\x1f' + group;
}

void BatchStats::Add(const BatchStats& o) {
  events += o.events;
  applied += o.applied;
  stale += o.stale;
  dead_letters += o.dead_letters;
  entities_written += o.entities_written;
  units_recomputed += o.units_recomputed;
  tails_spliced += o.tails_spliced;
  tails_rendered += o.tails_rendered;
  documents_written += o.documents_written;
  documents_deleted += o.documents_deleted;
  busy_retries += o.busy_retries;
}

DecodedBatch DecodeBatch(const Config& config, const std::vector<RawEvent>& raw) {
  DecodedBatch batch;
  batch.raw_count = raw.size();
  std::map<std::string, size_t> stream_index;
  for (const RawEvent& event : raw) {
    auto inserted = stream_index.emplace(StreamKey(event.at), batch.last_positions.size());
    if (inserted.second) {
      batch.last_positions.push_back(event.at);
    } else {
      SourcePosition& last = batch.last_positions[inserted.first->second];
      if (event.at.position > last.position) last = event.at;
    }
    DecodedBatch::Item item;
    item.at = event.at;
    Status status = DecodeEvent(config, event.bytes, &item.event);
    if (status.ok()) {
      batch.events.push_back(std::move(item));
    } else {
      batch.dead_letters.push_back({event.at, event.bytes, status.message()});
    }
  }
  return batch;
}

Status BatchApplier::Apply(Store* store, const DecodedBatch& batch, BatchStats* stats) const {
  // Busy means another writer held a phase-2 lock; the transaction rolled
  // back holding nothing. Retry at once; from the third attempt on, run alone
  // (exclusive writer lock), which always succeeds.
  for (int attempt = 1;; ++attempt) {
    const bool exclusive = attempt >= kAttemptsBeforeExclusive;
    std::unique_ptr<StoreTransaction> txn;
    DENORMD_RETURN_IF_ERROR(store->Begin(&txn));
    BatchStats local;
    Status status = txn->LockWriters(exclusive);
    if (status.ok()) status = ApplyInTransaction(txn.get(), batch, exclusive, &local);
    if (status.ok()) status = txn->Commit();
    if (status.ok()) {
      local.busy_retries = attempt - 1;
      stats->Add(local);
      return Status::Ok();
    }
    if (!status.IsBusy() || exclusive) return status;
  }
}

// How concurrent instances stay correct.
//
// Documents are recomputed from source rows under READ COMMITTED, so the risk
// is a transaction computing a document from data another transaction is
// about to change, and the other transaction not knowing about the document.
// Two lock phases close every such window (locks are transaction-scoped):
//
//   Phase 1: lock every entity the batch changes, then read its stored state.
//     Two batches changing one entity serialize here, so the version check
//     and the merge patch always see the latest committed state.
//   Phase 2: after the source rows are written and the affected documents are
//     known, lock (a) the root entity of every document to recompute (the
//     bucket group for bucket documents) and (b) every lookup target named by
//     the new state of the changed entities. Then read and recompute.
//
// Why no document can be left stale:
//   * Two batches that both recompute document D both lock D's key in phase
//     2; the second reads only after the first committed, so it sees both
//     batches' source changes (READ COMMITTED gives each statement a fresh
//     snapshot).
//   * A child change (count/ids/embed/buckets) names its parent from its own
//     data, before and after, so both batches know D.
//   * The lookup case: batch R makes book b1 reference author a1 while batch W
//     renames a1. W finds b1 only through the reference index, which does not
//     show R's row until R commits. But R locks a1 in phase 2(b) and W locks
//     a1 in phase 1, before W queries the index. If W holds a1 first, R waits
//     and then reads W's committed name. If R holds a1 first, W waits, and its
//     index query then sees R's committed b1 and recomputes it.
//
// Why it cannot deadlock: a transaction waits only (1) for the writer lock,
// holding nothing else, or (2) in phase 1, whose keys are taken in one sorted
// statement, holding only the writer lock (shared, which never blocks another
// shared holder). Phase 2 asks without waiting: if another writer holds one of
// its keys (the classic cycle: W holds author a1 and wants book b1, R holds
// b1 and wants a1), the batch rolls back with Busy and runs again; from the
// third attempt it takes the writer lock exclusively, so it runs alone and
// may wait.

Status BatchApplier::ApplyInTransaction(StoreTransaction* txn, const DecodedBatch& batch,
                                        bool exclusive, BatchStats* stats) const {
  const Config& config = plan_.config();
  stats->events = batch.raw_count;
  stats->dead_letters = batch.dead_letters.size();

  // Phase 1: lock and load the changed entities.
  std::set<EntityKey> key_set;
  for (const DecodedBatch::Item& item : batch.events) key_set.insert(item.event.key);
  std::vector<EntityKey> keys(key_set.begin(), key_set.end());
  std::vector<std::string> lock_keys;
  for (const EntityKey& key : keys) lock_keys.push_back(EntityLockKey(key.type, key.id));
  DENORMD_RETURN_IF_ERROR(txn->LockKeys(lock_keys, StoreTransaction::LockMode::kWait));
  std::vector<EntityRecord> loaded;
  DENORMD_RETURN_IF_ERROR(txn->LoadEntities(keys, &loaded));
  std::map<EntityKey, std::optional<EntityRecord>> before, after;
  for (const EntityKey& key : keys) before[key] = std::nullopt;
  for (EntityRecord& record : loaded) before[record.key] = record;
  after = before;

  // Apply the events in order, entity by entity state.
  std::map<std::string, PositionUpdate> streams;
  for (const SourcePosition& last : batch.last_positions) streams[StreamKey(last)].at = last;
  for (const SourcePosition& previous : batch.previous_positions) {
    auto it = streams.find(StreamKey(previous));
    if (it != streams.end()) it->second.expected_previous = previous.position;
  }
  for (const DeadLetter& letter : batch.dead_letters) streams[StreamKey(letter.at)].dead++;
  for (const DecodedBatch::Item& item : batch.events) {
    const EntityEvent& event = item.event;
    PositionUpdate& stream = streams[StreamKey(item.at)];
    std::optional<EntityRecord>& state = after[event.key];
    if (event.version && state && state->version && *event.version <= *state->version) {
      stream.stale++;
      stats->stale++;
      continue;
    }
    EntityRecord next;
    next.key = event.key;
    next.version = event.version ? event.version : (state ? state->version : std::nullopt);
    switch (event.op) {
      case EventOp::kUpsert:
        next.data = event.data;
        break;
      case EventOp::kPatch: {
        auto patched = NewEntityJson();
        patched->SetObject();
        if (IsLive(state)) patched->CopyFrom(*state->data, patched->GetAllocator());
        ApplyMergePatch(patched.get(), *event.data, patched->GetAllocator());
        next.data = std::move(patched);
        break;
      }
      case EventOp::kDelete:
        next.deleted = true;
        break;
    }
    state = std::move(next);
    stream.applied++;
    stats->applied++;
  }

  // Write the source rows that changed, with their reference-index rows.
  std::vector<EntityWrite> writes;
  std::vector<EntityKey> changed;
  for (const EntityKey& key : keys) {
    if (SameRecord(before[key], after[key])) continue;
    writes.push_back({*after[key], ReferenceRowsOf(plan_, *after[key])});
    bool data_changed = IsLive(before[key]) != IsLive(after[key]) ||
                        (IsLive(before[key]) && !JsonEquals(*before[key]->data, *after[key]->data));
    if (data_changed) changed.push_back(key);
  }
  stats->entities_written = writes.size();
  if (!writes.empty()) DENORMD_RETURN_IF_ERROR(txn->WriteEntities(writes));

  // Find the affected units.
  UnitSet units;
  BucketBounds bucket_bounds;
  std::vector<std::string> phase2_locks;
  // (projection, lookup expression) -> ids of changed targets whose view changed
  std::map<std::pair<size_t, const Expression*>, std::vector<std::string>> lookup_fanout;
  for (const EntityKey& key : changed) {
    const std::optional<EntityRecord>& old_state = before[key];
    const std::optional<EntityRecord>& new_state = after[key];
    const EntityTypePlan& type_plan = plan_.ForType(key.type);
    for (size_t p : type_plan.own_projections) units[p].insert(key.id);
    for (size_t p : type_plan.bucket_projections) {
      const ProjectionConfig& projection = config.projections[p];
      auto old_group = GroupOf(projection.by, old_state);
      auto new_group = GroupOf(projection.by, new_state);
      const OrderBy* order = &projection.order_by;
      std::string old_sort = old_group ? SortKey(order, key.id, *old_state->data) : "";
      std::string new_sort = new_group ? SortKey(order, key.id, *new_state->data) : "";
      if (old_group && new_group && *old_group == *new_group && old_sort == new_sort) {
        if (ViewChanged(projection.select, order, old_state, new_state)) {
          AddPoint(std::move(new_sort), key.id, &bucket_bounds[p], *new_group);
          units[p].insert(*new_group);
        }
      } else if (old_group != new_group ||
                 ViewChanged(projection.select, order, old_state, new_state)) {
        if (old_group) {
          units[p].insert(*old_group);
          LowerBound(std::move(old_sort), key.id, true, &bucket_bounds[p], *old_group);
        }
        if (new_group) {
          units[p].insert(*new_group);
          LowerBound(std::move(new_sort), key.id, false, &bucket_bounds[p], *new_group);
        }
      }
    }
    for (const RelationUse& use : type_plan.as_child) {
      std::vector<std::string> old_targets = TargetsOf(use.expression->via, old_state);
      std::vector<std::string> new_targets = TargetsOf(use.expression->via, new_state);
      bool payload = use.expression->kind == Expression::Kind::kEmbed &&
                     ViewChanged(use.expression->select, &use.expression->order_by, old_state,
                                 new_state);
      std::set<std::string>& affected = units[use.projection];
      for (const auto* list : {&old_targets, &new_targets}) {
        const auto& other = list == &old_targets ? new_targets : old_targets;
        for (const std::string& target : *list) {
          if (payload || !std::binary_search(other.begin(), other.end(), target)) {
            affected.insert(target);
          }
        }
      }
    }
    for (const RelationUse& use : type_plan.as_lookup_target) {
      if (ViewChanged(use.expression->select, nullptr, old_state, new_state)) {
        lookup_fanout[{use.projection, use.expression}].push_back(key.id);
      }
    }
    for (const RelationUse& use : type_plan.lookups) {
      for (const std::string& target : TargetsOf(use.expression->by, new_state)) {
        phase2_locks.push_back(EntityLockKey(use.expression->entity, target));
      }
    }
  }
  for (const auto& entry : lookup_fanout) {
    size_t p = entry.first.first;
    const Expression* expression = entry.first.second;
    std::vector<Referrer> referrers;
    DENORMD_RETURN_IF_ERROR(txn->FindReferrers(config.projections[p].from,
                                               RelationName(expression->by, nullptr, false),
                                               entry.second, &referrers));
    for (const Referrer& referrer : referrers) units[p].insert(referrer.entity.key.id);
  }

  // Phase 2: lock the documents to recompute and the new lookup targets.
  for (const auto& entry : units) {
    const ProjectionConfig& projection = config.projections[entry.first];
    for (const std::string& unit : entry.second) {
      phase2_locks.push_back(projection.kind == ProjectionConfig::Kind::kBuckets
                                 ? GroupLockKey(projection.name, unit)
                                 : EntityLockKey(projection.from, unit));
    }
  }
  if (!phase2_locks.empty()) {
    DENORMD_RETURN_IF_ERROR(txn->LockKeys(
        phase2_locks, exclusive ? StoreTransaction::LockMode::kWait
                                : StoreTransaction::LockMode::kNoWait));
  }

  DENORMD_RETURN_IF_ERROR(RecomputeUnits(txn, units, stats, &bucket_bounds));

  if (!batch.dead_letters.empty()) DENORMD_RETURN_IF_ERROR(txn->AddDeadLetters(batch.dead_letters));
  std::vector<PositionUpdate> positions;
  for (auto& entry : streams) positions.push_back(entry.second);
  if (!positions.empty()) DENORMD_RETURN_IF_ERROR(txn->SavePositions(positions));
  return Status::Ok();
}

Status BatchApplier::RecomputeUnits(StoreTransaction* txn, const UnitSet& units,
                                    BatchStats* stats, const BucketBounds* bounds) const {
  const Config& config = plan_.config();
  for (const auto& entry : units) {
    const ProjectionConfig& projection = config.projections[entry.first];
    bool buckets = projection.kind == ProjectionConfig::Kind::kBuckets;
    std::vector<std::string> all;
    std::map<std::string, BucketBound> tails;  // bucket groups with a bound
    const std::map<std::string, BucketBound>* group_bounds = nullptr;
    if (buckets && bounds != nullptr) {
      auto found = bounds->find(entry.first);
      if (found != bounds->end()) group_bounds = &found->second;
    }
    for (const std::string& unit : entry.second) {
      auto bound = group_bounds ? group_bounds->find(unit)
                                : std::map<std::string, BucketBound>::const_iterator();
      if (group_bounds && bound != group_bounds->end()) {
        tails.insert(*bound);
        if (tails.size() >= kTailGroupsPerChunk) {
          DENORMD_RETURN_IF_ERROR(RecomputeBucketTails(txn, entry.first, tails, stats));
          tails.clear();
        }
      } else {
        all.push_back(unit);
      }
    }
    if (!tails.empty()) {
      DENORMD_RETURN_IF_ERROR(RecomputeBucketTails(txn, entry.first, tails, stats));
    }
    for (size_t start = 0; start < all.size(); start += kUnitsPerChunk) {
      std::vector<std::string> chunk(all.begin() + start,
                                     all.begin() + std::min(all.size(), start + kUnitsPerChunk));
      std::map<std::string, std::vector<DocumentRow>> built;
      DENORMD_RETURN_IF_ERROR(builder_.Build(txn, entry.first, chunk, &built));
      stats->units_recomputed += chunk.size();
      std::vector<DocumentRow> upserts;
      std::set<std::string> kept;
      std::vector<std::string> deletes;
      for (auto& unit : built) {
        if (!buckets && unit.second.empty()) deletes.push_back(unit.first);
        for (DocumentRow& row : unit.second) {
          kept.insert(row.id);
          upserts.push_back(std::move(row));
        }
      }
      if (buckets) {
        std::vector<DocumentRow> existing;
        DENORMD_RETURN_IF_ERROR(
            txn->LoadDocumentsByPk(projection.collection, projection.name, chunk, &existing));
        for (const DocumentRow& row : existing) {
          if (!kept.count(row.id)) deletes.push_back(row.id);
        }
      }
      uint64_t written = 0, deleted = 0;
      if (!upserts.empty()) {
        DENORMD_RETURN_IF_ERROR(
            txn->UpsertDocuments(projection.collection, projection.name, upserts, &written));
      }
      if (!deletes.empty()) {
        DENORMD_RETURN_IF_ERROR(
            txn->DeleteDocuments(projection.collection, projection.name, deletes, &deleted));
      }
      stats->documents_written += written;
      stats->documents_deleted += deleted;
    }
  }
  return Status::Ok();
}

Status BatchApplier::RecomputeBucketTails(StoreTransaction* txn, size_t p,
                                          const std::map<std::string, BucketBound>& bounds,
                                          BatchStats* stats) const {
  const ProjectionConfig& projection = plan_.config().projections[p];
  std::vector<std::string> groups, keep;  // groups whose membership changed
  for (const auto& bound : bounds) {
    if (bound.second.has_tail) groups.push_back(bound.first);
  }
  uint64_t written = 0, deleted = 0, rendered = 0;
  DENORMD_RETURN_IF_ERROR(builder_.BuildBucketTails(
      txn, p, bounds,
      [&](std::vector<DocumentRow>* rows) {
        return txn->UpsertDocuments(projection.collection, projection.name, *rows, &written);
      },
      &keep, &rendered));
  if (!groups.empty()) {
    DENORMD_RETURN_IF_ERROR(txn->DeleteDocumentsExcept(projection.collection, projection.name,
                                                       groups, keep, &deleted));
  }
  stats->units_recomputed += bounds.size();
  stats->tails_spliced += groups.size() - rendered;
  stats->tails_rendered += rendered;
  stats->documents_written += written;
  stats->documents_deleted += deleted;
  return Status::Ok();
}

Status BatchApplier::VerifyUnits(StoreTransaction* txn, const UnitSet& units,
                                 std::vector<std::string>* differences) const {
  const Config& config = plan_.config();
  for (const auto& entry : units) {
    const ProjectionConfig& projection = config.projections[entry.first];
    bool buckets = projection.kind == ProjectionConfig::Kind::kBuckets;
    std::vector<std::string> all(entry.second.begin(), entry.second.end());
    for (size_t start = 0; start < all.size(); start += kUnitsPerChunk) {
      std::vector<std::string> chunk(all.begin() + start,
                                     all.begin() + std::min(all.size(), start + kUnitsPerChunk));
      std::map<std::string, std::vector<DocumentRow>> built;
      DENORMD_RETURN_IF_ERROR(builder_.Build(txn, entry.first, chunk, &built));
      std::map<std::string, DocumentRow> expected;
      for (auto& unit : built) {
        for (DocumentRow& row : unit.second) expected[row.id] = std::move(row);
      }
      std::vector<DocumentRow> stored;
      if (buckets) {
        DENORMD_RETURN_IF_ERROR(
            txn->LoadDocumentsByPk(projection.collection, projection.name, chunk, &stored));
      } else {
        DENORMD_RETURN_IF_ERROR(
            txn->LoadDocuments(projection.collection, projection.name, chunk, &stored));
      }
      std::string where = projection.name + " (" + projection.collection + ") ";
      for (const DocumentRow& row : stored) {
        auto it = expected.find(row.id);
        if (it == expected.end()) {
          differences->push_back(where + row.id + ": unexpected document " + Truncate(row.json));
          continue;
        }
        JsonDocument a, b;
        bool same = ParseJson(row.json, &a).ok() && ParseJson(it->second.json, &b).ok() &&
                    JsonEquals(a, b) && row.pk == it->second.pk;
        if (!same) {
          differences->push_back(where + row.id + ": differs\n    stored:   " +
                                 Truncate(row.json) + "\n    expected: " +
                                 Truncate(it->second.json));
        }
        expected.erase(it);
      }
      for (const auto& missing : expected) {
        differences->push_back(where + missing.first + ": missing, expected " +
                               Truncate(missing.second.json));
      }
    }
  }
  return Status::Ok();
}

}  // namespace denormd
