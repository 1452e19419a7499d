#include "projections/batch_applier.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <set>
#include <tuple>

#include "projections/lanes.h"
#include "projections/linked_rows.h"
#include "projections/reference_index.h"

namespace denormd {

namespace {

// A batch rolled back as Busy runs its second attempt alone: measured with
// two instances on one store (bench/run.py --horizontal, 2026-11-28), a
// second concurrent attempt met a held key again in most batches, and the
// rolled-back attempts took 30 % of the instances' batch time with the third
// attempt alone (one run) against 8-18 % with the second (four runs;
// docs/benchmarks.md, "Several instances on one store").
constexpr int kAttemptsBeforeExclusive = 2;

std::string StreamKey(const SourcePosition& at) {
  return at.source + '\x1f' + std::to_string(at.partition);
}

bool SameRecord(const EntityState& a, const EntityState& b) {
  if (!a || !b) return !a && !b;
  if (a->deleted != b->deleted || a->version != b->version) return false;
  if (!a->data || !b->data) return !a->data && !b->data;
  return JsonEquals(*a->data, *b->data);
}

// The top-level fields whose values differ, ascending; "(created)" or
// "(deleted)" when the entity became or stopped being live.
std::vector<std::string> ChangedFields(const EntityState& before, const EntityState& after) {
  if (!IsLive(before)) {
    return IsLive(after) ? std::vector<std::string>{"(created)"} : std::vector<std::string>{};
  }
  if (!IsLive(after)) return {"(deleted)"};
  const JsonValue& a = *before->data;
  const JsonValue& b = *after->data;
  std::set<std::string> fields;
  if (a.IsObject() && b.IsObject()) {
    for (auto m = a.MemberBegin(); m != a.MemberEnd(); ++m) {
      auto other = b.FindMember(m->name);
      if (other == b.MemberEnd() || other->value != m->value) fields.insert(m->name.GetString());
    }
    for (auto m = b.MemberBegin(); m != b.MemberEnd(); ++m) {
      if (!a.HasMember(m->name)) fields.insert(m->name.GetString());
    }
  }
  return std::vector<std::string>(fields.begin(), fields.end());
}

// Whether the data (or liveness) differs: only such changes affect documents.

bool DataChanged(const EntityState& before, const EntityState& after) {
  if (IsLive(before) != IsLive(after)) return true;
  return IsLive(before) && !JsonEquals(*before->data, *after->data);
}

// What NextState made of an event.
enum class Outcome { kApplied, kStale, kRefused };

// The state after one event: kStale when the event is older than the state;
// kRefused (with *reason) when it cannot be applied to it.
Outcome NextState(const EntityEvent& event, EntityState* state, std::string* reason) {
  if (event.version && *state && (*state)->version && *event.version <= *(*state)->version) {
    return Outcome::kStale;
  }
  EntityRecord next;
  next.key = event.key;
  next.version = event.version ? event.version : (*state ? (*state)->version : std::nullopt);
  switch (event.op) {
    case EventOp::kUpsert:
      if (event.unchanged.empty()) {
        next.data = event.data;
        break;
      }
      // Members the source left out keep the stored values.
      if (!IsLive(*state)) {
        *reason = "the source did not send the unchanged value of \"" + event.unchanged[0] +
                  "\" (a TOASTed column: see docs/configuration.md, \"Unchanged large values\"), "
                  "and no stored " + event.key.type + " " + event.key.id + " has it";
        return Outcome::kRefused;
      } else {
        auto merged = NewEntityJson();
        merged->CopyFrom(*event.data, merged->GetAllocator());
        const JsonValue& stored = *(*state)->data;
        for (const std::string& name : event.unchanged) {
          const JsonValue member(rapidjson::StringRef(name.data(), name.size()));
          auto placeholder = merged->FindMember(member);
          if (placeholder == merged->MemberEnd()) continue;
          auto kept = stored.FindMember(member);
          if (kept == stored.MemberEnd()) {  // absent before: absent still
            merged->RemoveMember(placeholder);
          } else {
            placeholder->value.CopyFrom(kept->value, merged->GetAllocator());
          }
        }
        next.data = std::move(merged);
      }
      break;
    case EventOp::kPatch: {
      auto patched = NewEntityJson();
      patched->SetObject();
      if (IsLive(*state)) patched->CopyFrom(*(*state)->data, patched->GetAllocator());
      ApplyMergePatch(patched.get(), *event.data, patched->GetAllocator());
      next.data = std::move(patched);
      break;
    }
    case EventOp::kDelete:
      next.deleted = true;
      break;
  }
  *state = std::move(next);
  return Outcome::kApplied;
}

// The write of `record` with the index rows it gains and loses.
EntityWrite IndexChange(const EntityRecord& record, std::vector<ReferenceRow> before,
                        std::vector<ReferenceRow> after) {
  auto key = [](const ReferenceRow& row) {
    return std::make_tuple(row.relation->name(), row.target, row.sort);
  };
  auto less = [&](const ReferenceRow& a, const ReferenceRow& b) { return key(a) < key(b); };
  std::sort(before.begin(), before.end(), less);
  std::sort(after.begin(), after.end(), less);
  EntityWrite write;
  write.record = record;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(write.added), less);
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                      std::back_inserter(write.removed), less);
  return write;
}

// "<source>/<partition>@<position>" of every stream the batch reached,
// comma separated: what its document changes are attributed to.
std::string ChangeSourceOf(const EventBatch& batch) {
  std::string out;
  for (const SourcePosition& at : batch.last_positions) {
    if (!out.empty()) out += ',';
    out += at.source + '/' + std::to_string(at.partition) + '@' + std::to_string(at.position);
  }
  return out;
}

// The targets asked for by any projection.
std::vector<std::string> AllTargets(const std::map<size_t, std::set<std::string>>& by_projection) {
  std::set<std::string> targets;
  for (const auto& projection : by_projection) {
    targets.insert(projection.second.begin(), projection.second.end());
  }
  return std::vector<std::string>(targets.begin(), targets.end());
}

}  // namespace

std::string EntityLockKey(const std::string& type, const std::string& id) {
  return "e\x1f" + type + '\x1f' + id;
}

std::string GroupLockKey(const std::string& projection, const std::string& group) {
  return "g\x1f" + projection + '\x1f' + group;
}

BatchApplier::BatchApplier(const ProjectionPlan& plan) : plan_(plan), part_of_(PartOfType(plan)) {}

std::vector<std::string> BatchApplier::PartsOf(const EventBatch& batch) const {
  std::set<std::string> parts;
  for (const EventBatch::Item& item : batch.events) {
    auto it = part_of_.find(item.event.key.type);
    if (it != part_of_.end()) parts.insert(it->second);
  }
  return std::vector<std::string>(parts.begin(), parts.end());
}

Status BatchApplier::Apply(Store* store, const EventBatch& batch, BatchStats* stats) const {
  // Busy means another writer held a phase-2 lock; the transaction rolled
  // back holding nothing. Retry at once, alone in the batch's parts of the
  // model (kAttemptsBeforeExclusive), which always succeeds.
  const std::vector<std::string> parts = PartsOf(batch);
  uint64_t round_trips = 0, statements = 0;
  double busy_seconds = 0;
  for (int attempt = 1;; ++attempt) {
    const bool exclusive = attempt >= kAttemptsBeforeExclusive;
    const auto attempt_start = std::chrono::steady_clock::now();
    std::unique_ptr<StoreTransaction> txn;
    DENORMD_RETURN_IF_ERROR(store->Begin(&txn));
    BatchStats local;
    Status status = txn->locks().LockWritersOf(parts, exclusive);
    if (status.ok()) status = ApplyInTransaction(*txn, batch, exclusive, &local);
    if (status.ok()) status = txn->Commit();
    round_trips += txn->round_trips();
    statements += txn->statements();
    if (status.ok()) {
      local.busy_retries = attempt - 1;
      local.busy_seconds = busy_seconds;
      local.round_trips = round_trips;
      local.statements = statements;
      // Every change's fan-out, not only the largest that Add keeps.
      std::vector<EventFanOut> fanouts = std::move(local.fanouts);
      local.fanouts.clear();
      stats->Add(local);
      stats->fanouts.insert(stats->fanouts.end(), std::make_move_iterator(fanouts.begin()),
                            std::make_move_iterator(fanouts.end()));
      return Status::Ok();
    }
    if (!status.IsBusy() || exclusive) return status;
    busy_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - attempt_start).count();
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
//   * The same one step further, through a link entity (count/ids/lookup
//     `through`): batch R writes link row book_author (b1, a1) while W
//     renames (or deletes) a1. W finds b1 only through the link rows in the
//     index; R locks a1 in phase 2(b), as a `to` target its row names now,
//     and W locks a1 in phase 1, before its index query. The documents named
//     by the row's `from` are R's units, named from the row itself.
//
// Why it cannot deadlock: a transaction waits only (1) for the writer locks,
// holding nothing else, or (2) in phase 1, whose keys are taken in one sorted
// statement, holding only the writer locks (shared, which never block another
// shared holder). Phase 2 waits only briefly (WriteLocks::Mode::kWaitBriefly):
// if another writer still holds one of its keys after that (the classic
// cycle: W holds author a1 and wants book b1, R holds b1 and wants a1), the
// batch rolls back with Busy and runs again at once, alone in its parts of
// the model (WriteLocks::LockWritersOf, kAttemptsBeforeExclusive), so it may
// wait: every writer that could hold one of its keys is a batch touching one
// of those parts or a writer of any part, and neither runs beside it. A
// batch of other parts runs on beside it; its keys are other keys, since a
// key names an entity of the batch's types, a document of a projection
// reading them or a type such a projection reads, all in the parts of its
// events' types (PartOfType).
Status BatchApplier::ApplyInTransaction(StoreTransaction& txn, const EventBatch& batch,
                                        bool exclusive, BatchStats* stats) const {
  stats->events = batch.raw_count;
  stats->dead_letters = batch.dead_letters.size();
  stats->skipped = batch.skipped_count;
  txn.SetChangeSource(ChangeSourceOf(batch));
  EntityStates states;
  DENORMD_RETURN_IF_ERROR(LockAndLoad(txn, batch, &states));
  Streams streams;
  std::vector<DeadLetter> refused;
  ApplyEvents(batch, &states, &streams, &refused, stats);
  std::vector<EntityChange> changes;
  DENORMD_RETURN_IF_ERROR(WriteSource(txn, states, &changes, stats));
  if (!changes.empty()) DENORMD_RETURN_IF_ERROR(txn.source().Journal(changes));
  AffectedUnits affected;
  DENORMD_RETURN_IF_ERROR(CollectAffected(txn, changes, &affected, &stats->fanouts));
  DENORMD_RETURN_IF_ERROR(LockAffected(txn, affected, exclusive));
  // The rows kept through a link (their `to` entities are locked now), and
  // what moved in them, before the documents that read them.
  LinkedCandidates linked;
  linked.afters_are_current = true;
  AddLinkedCandidates(plan_.linked_relations(), changes, &linked);
  if (!linked.empty()) DENORMD_RETURN_IF_ERROR(ReconcileLinkedRows(txn, linked, &affected.moves));
  // What the projections will read for their units (roots, counters,
  // stored lists), told to the store before the first of them reads: a
  // store that queues statements sends it all with that first read, and
  // answers the later ones without a round trip each (Projection::
  // ReadAhead). Under the phase-2 locks and after every source and index
  // write of the batch, so what is read ahead is what each read would find.
  for (const auto& entry : affected.units) {
    auto changes = affected.group_changes.find(entry.first);
    plan_.projection(entry.first)
        .ReadAhead(txn, entry.second,
                   changes == affected.group_changes.end() ? nullptr : &changes->second);
  }
  DENORMD_RETURN_IF_ERROR(Recompute(txn, affected, /*batch_moves=*/true, stats));
  return RecordStreams(txn, batch, refused, &streams);
}

Status BatchApplier::LockAndLoad(StoreTransaction& txn, const EventBatch& batch,
                                 EntityStates* states) const {
  std::set<EntityKey> key_set;
  for (const EventBatch::Item& item : batch.events) key_set.insert(item.event.key);
  std::vector<EntityKey> keys(key_set.begin(), key_set.end());
  std::vector<std::string> lock_keys;
  for (const EntityKey& key : keys) lock_keys.push_back(EntityLockKey(key.type, key.id));
  DENORMD_RETURN_IF_ERROR(txn.locks().LockKeys(lock_keys, WriteLocks::Mode::kWait));
  std::vector<EntityRecord> loaded;
  DENORMD_RETURN_IF_ERROR(txn.source().LoadEntities(keys, &loaded));
  for (const EntityKey& key : keys) (*states)[key];
  for (EntityRecord& record : loaded) {
    auto& state = (*states)[record.key];
    state.first = record;
    state.second = std::move(record);
  }
  return Status::Ok();
}

Status BatchApplier::IndexLimitsError(const EntityState& state) const {
  if (!IsLive(state)) return Status::Ok();
  for (const ReferenceRow& row : plan_.ReferenceRowsOf(*state)) {
    // A pair's target is two ids, each checked in the link's own relations.
    if (row.relation->flavour() == Relation::Flavour::kPairs) continue;
    if (row.target.size() > kMaxIndexedIdBytes) {
      return Status::InvalidInput("the value of \"" + row.relation->path().text + "\" is " +
                                  std::to_string(row.target.size()) +
                                  " bytes long; a referenced id is at most " +
                                  std::to_string(kMaxIndexedIdBytes));
    }
    if (row.sort.size() > kMaxSortKeyBytes) {
      return Status::InvalidInput("the order_by value \"" + row.relation->order()->path.text +
                                  "\" is " + std::to_string(row.sort.size()) +
                                  " bytes long; an ordered value is at most " +
                                  std::to_string(kMaxSortKeyBytes));
    }
  }
  return Status::Ok();
}

void BatchApplier::ApplyEvents(const EventBatch& batch, EntityStates* states, Streams* streams,
                               std::vector<DeadLetter>* refused, BatchStats* stats) const {
  for (const SourcePosition& last : batch.last_positions) (*streams)[StreamKey(last)].at = last;
  for (const SourcePosition& previous : batch.previous_positions) {
    auto it = streams->find(StreamKey(previous));
    if (it != streams->end()) it->second.expected_previous = previous.position;
  }
  for (const DeadLetter& letter : batch.dead_letters) (*streams)[StreamKey(letter.at)].dead++;
  for (const EventBatch::Item& item : batch.events) {
    PositionUpdate& stream = (*streams)[StreamKey(item.at)];
    EntityState& state = (*states)[item.event.key].second;
    EntityState next = state;
    std::string reason;
    const Outcome outcome = NextState(item.event, &next, &reason);
    if (outcome == Outcome::kStale) {
      stream.stale++;
      stats->stale++;
      continue;
    }
    Status limits = outcome == Outcome::kRefused ? Status::InvalidInput(reason)
                                                 : IndexLimitsError(next);
    if (!limits.ok()) {
      refused->push_back({item.at, item.raw, limits.message()});
      stream.dead++;
      stats->dead_letters++;
      continue;
    }
    state = std::move(next);
    stream.applied++;
    stats->applied++;
  }
}

Status BatchApplier::WriteSource(StoreTransaction& txn, const EntityStates& states,
                                 std::vector<EntityChange>* changes, BatchStats* stats) const {
  std::vector<EntityWrite> writes;
  for (const auto& entry : states) {
    const EntityState& before = entry.second.first;
    const EntityState& after = entry.second.second;
    if (SameRecord(before, after)) continue;
    writes.push_back(IndexChange(*after, before ? plan_.ReferenceRowsOf(*before)
                                                : std::vector<ReferenceRow>(),
                                 plan_.ReferenceRowsOf(*after)));
    if (DataChanged(before, after)) changes->push_back({entry.first, &before, &after});
  }
  stats->entities_written = writes.size();
  if (writes.empty()) return Status::Ok();
  return txn.source().WriteEntities(writes);
}

Status BatchApplier::CollectAffected(StoreTransaction& txn,
                                     const std::vector<EntityChange>& changes,
                                     AffectedUnits* affected,
                                     std::vector<EventFanOut>* fanouts) const {
  // With `fanouts`, each change is collected alone first, for what it
  // costs: the units it names itself, and the index targets (relation or
  // link, projection, target) whose referrers are counted below.
  using Target = std::tuple<const void*, size_t, std::string>;
  struct Own {
    uint64_t units = 0;
    std::vector<Target> targets;
  };
  std::vector<Own> own(fanouts != nullptr ? changes.size() : 0);
  for (size_t i = 0; i < changes.size(); ++i) {
    const EntityChange& change = changes[i];
    const EntityTypePlan& type_plan = plan_.ForType(change.key.type);
    AffectedUnits alone;
    AffectedUnits* into = fanouts != nullptr ? &alone : affected;
    for (const Projection* projection : type_plan.projections) {
      projection->CollectAffected(change, into);
    }
    for (const Derivation* derivation : type_plan.dependents) {
      derivation->CollectAffected(change, into);
    }
    if (fanouts == nullptr) continue;
    for (const auto& units : alone.units) own[i].units += units.second.size();
    for (const auto& relation : alone.referrers_of) {
      for (const auto& projection : relation.second) {
        for (const std::string& target : projection.second) {
          own[i].targets.emplace_back(relation.first, projection.first, target);
        }
      }
    }
    for (const auto& link : alone.linked_to) {
      for (const auto& projection : link.second) {
        for (const std::string& target : projection.second) {
          own[i].targets.emplace_back(link.first, projection.first, target);
        }
      }
    }
    affected->Merge(std::move(alone));
  }
  // Referrers found per (relation or link, projection, target).
  std::map<Target, uint64_t> found;
  // Documents found through the reference index: one read per relation.
  for (const auto& entry : affected->referrers_of) {
    std::vector<Referrer> referrers;
    DENORMD_RETURN_IF_ERROR(ReadReferrers(txn.index(), *entry.first, AllTargets(entry.second),
                                          ReferenceIndex::Read::kKeys, &referrers));
    for (const Referrer& referrer : referrers) {
      for (const auto& projection : entry.second) {
        if (projection.second.count(referrer.target)) {
          affected->AddUnit(projection.first, referrer.entity.key.id);
          if (fanouts != nullptr) found[{entry.first, projection.first, referrer.target}]++;
        }
      }
    }
  }
  // And through link rows: one read per link.
  for (const auto& entry : affected->linked_to) {
    std::vector<LinkedPair> pairs;
    DENORMD_RETURN_IF_ERROR(
        ReadLinksTo(txn.index(), *entry.first, AllTargets(entry.second), &pairs));
    for (const LinkedPair& pair : pairs) {
      for (const auto& projection : entry.second) {
        if (projection.second.count(pair.to)) {
          affected->AddUnit(projection.first, pair.from);
          if (fanouts != nullptr) found[{entry.first, projection.first, pair.to}]++;
        }
      }
    }
  }
  if (fanouts == nullptr) return Status::Ok();
  for (size_t i = 0; i < changes.size(); ++i) {
    EventFanOut fanout{changes[i].key.type, changes[i].key.id,
                       ChangedFields(*changes[i].before, *changes[i].after), own[i].units};
    for (const Target& target : own[i].targets) {
      auto it = found.find(target);
      if (it != found.end()) fanout.documents += it->second;
    }
    fanouts->push_back(std::move(fanout));
  }
  return Status::Ok();
}

Status BatchApplier::Refresh(StoreTransaction& txn, const std::vector<EntityChange>& changes,
                             BatchStats* stats) const {
  // The rows kept through a link, from the source as it is now, under the
  // locks of the entities whose rows are decided (batches may run).
  LinkedCandidates linked;
  AddLinkedCandidates(plan_.linked_relations(), changes, &linked);
  if (!linked.empty()) {
    std::vector<std::string> locks;
    for (const auto& entry : linked.pairs) {
      for (const auto& pair : entry.second) {
        locks.push_back(EntityLockKey(entry.first->entity_type(), pair.second));
      }
    }
    for (const auto& entry : linked.entities) {
      for (const std::string& id : entry.second) {
        locks.push_back(EntityLockKey(entry.first->entity_type(), id));
      }
    }
    DENORMD_RETURN_IF_ERROR(txn.locks().LockKeys(locks, WriteLocks::Mode::kWait));
    DENORMD_RETURN_IF_ERROR(ReconcileLinkedRows(txn, linked, nullptr));
  }
  AffectedUnits affected;
  DENORMD_RETURN_IF_ERROR(CollectAffected(txn, changes, &affected, nullptr));
  // Bucket groups are rendered whole and referrers read, not moved: the
  // changes may repeat an entity (several batches), and the tables may
  // already hold some of them.
  affected.group_changes.clear();
  return Recompute(txn, affected, /*batch_moves=*/false, stats);
}

Status BatchApplier::LockAffected(StoreTransaction& txn, const AffectedUnits& affected,
                                  bool exclusive) const {
  std::vector<std::string> locks = affected.locks;
  for (const auto& entry : affected.units) {
    const Projection& projection = plan_.projection(entry.first);
    for (const std::string& unit : entry.second) locks.push_back(projection.LockKey(unit));
  }
  if (locks.empty()) return Status::Ok();
  return txn.locks().LockKeys(
      locks, exclusive ? WriteLocks::Mode::kWait : WriteLocks::Mode::kWaitBriefly);
}

Status BatchApplier::Recompute(StoreTransaction& txn, const AffectedUnits& affected,
                               bool batch_moves, BatchStats* stats) const {
  for (const auto& entry : affected.units) {
    auto changes = affected.group_changes.find(entry.first);
    DENORMD_RETURN_IF_ERROR(plan_.projection(entry.first).Recompute(
        txn, entry.second, changes == affected.group_changes.end() ? nullptr : &changes->second,
        batch_moves ? &affected.moves : nullptr, stats));
  }
  return Status::Ok();
}

Status BatchApplier::RecordStreams(StoreTransaction& txn, const EventBatch& batch,
                                   const std::vector<DeadLetter>& refused,
                                   Streams* streams) const {
  std::vector<DeadLetter> letters = batch.dead_letters;
  letters.insert(letters.end(), refused.begin(), refused.end());
  if (!letters.empty()) DENORMD_RETURN_IF_ERROR(txn.ledger().AddDeadLetters(letters));
  std::vector<PositionUpdate> positions;
  for (auto& entry : *streams) {
    positions.push_back(entry.second);
    positions.back().lane = batch.lane;
  }
  if (positions.empty()) return Status::Ok();
  return txn.ledger().SavePositions(positions);
}

}  // namespace denormd
