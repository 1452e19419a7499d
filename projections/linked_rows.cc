#include "projections/linked_rows.h"

#include <algorithm>
#include <iterator>

#include "projections/reference_index.h"

namespace denormd {

void AddLinkedCandidates(const std::vector<const Relation*>& linked, const EntityChange& change,
                         LinkedCandidates* out) {
  for (const Relation* relation : linked) {
    const Link& link = *relation->link();
    if (change.key.type == link.link_type()) {
      const auto before = link.PairsOf(*change.before);
      const auto after = link.PairsOf(*change.after);
      std::vector<std::pair<std::string, std::string>> changed;
      std::set_symmetric_difference(before.begin(), before.end(), after.begin(), after.end(),
                                    std::back_inserter(changed));
      if (!changed.empty()) out->pairs[relation].insert(changed.begin(), changed.end());
    }
    if (change.key.type == relation->entity_type() &&
        IsLive(*change.before) != IsLive(*change.after)) {
      out->entities[relation].insert(change.key.id);
    }
  }
}

void AddLinkedEntities(const std::vector<const Relation*>& linked,
                       const std::vector<EntityKey>& keys, LinkedCandidates* out) {
  for (const Relation* relation : linked) {
    for (const EntityKey& key : keys) {
      if (key.type == relation->entity_type()) out->entities[relation].insert(key.id);
    }
  }
}

namespace {

using Pair = std::pair<std::string, std::string>;  // (from id, to id)

// Reconciles the rows of one kLinked relation for `pairs` and every pair of
// `entities`; appends the writes to *writes (by owner) and the moves.
Status ReconcileRelation(StoreTransaction& txn, const Relation& relation, std::set<Pair> pairs,
                         const std::set<std::string>& entities,
                         std::map<EntityKey, ReferenceIndex::OwnedRows>* writes,
                         RelationMoves* moves) {
  const Link& link = *relation.link();
  // The pairs of `entities` that live link rows name now: those are linked.
  std::set<Pair> linked;
  if (!entities.empty()) {
    std::vector<LinkedPair> found;
    DENORMD_RETURN_IF_ERROR(ReadLinksTo(txn.index(), link,
                                        std::vector<std::string>(entities.begin(), entities.end()),
                                        &found));
    for (LinkedPair& pair : found) linked.insert({std::move(pair.from), std::move(pair.to)});
    pairs.insert(linked.begin(), linked.end());
  }
  if (pairs.empty()) return Status::Ok();
  // Whether each pair's `to` entity is live.
  std::set<std::string> to_ids;
  for (const Pair& pair : pairs) to_ids.insert(pair.second);
  std::vector<EntityKey> keys;
  for (const std::string& id : to_ids) keys.push_back({relation.entity_type(), id});
  std::vector<EntityRecord> records;
  DENORMD_RETURN_IF_ERROR(txn.source().LoadEntities(keys, &records));
  std::set<std::string> live;
  for (const EntityRecord& record : records) {
    if (record.live()) live.insert(record.key.id);
  }
  // Whether a live link row names each other pair: its counter.
  std::vector<IndexRange> counted;
  for (const Pair& pair : pairs) {
    if (live.count(pair.second) && !linked.count(pair)) {
      counted.push_back({Link::PairKey(pair.first, pair.second), std::nullopt, false, 0});
    }
  }
  std::map<std::string, uint64_t> counts;
  if (!counted.empty()) {
    DENORMD_RETURN_IF_ERROR(txn.index().Count(link.pairs(), counted, &counts));
  }
  // The stored rows, by key: the first row at or after (empty sort, to id).
  std::vector<IndexRange> probes;
  for (const Pair& pair : pairs) probes.push_back({pair.first, IndexKey{"", pair.second}, false, 1});
  std::vector<Referrer> found;
  DENORMD_RETURN_IF_ERROR(
      txn.index().Scan(relation, probes, ReferenceIndex::Read::kKeys, &found));
  std::set<Pair> stored;
  for (const Referrer& referrer : found) {
    if (referrer.sort.empty()) stored.insert({referrer.target, referrer.entity.key.id});
  }
  for (const Pair& pair : pairs) {
    const bool want =
        live.count(pair.second) &&
        (linked.count(pair) || counts[Link::PairKey(pair.first, pair.second)] > 0);
    const bool have = stored.count(pair) > 0;
    if (want == have) continue;
    const EntityKey owner{relation.entity_type(), pair.second};
    ReferenceIndex::OwnedRows& write = (*writes)[owner];
    write.owner = owner;
    (want ? write.added : write.removed).push_back({&relation, pair.first, ""});
    if (moves != nullptr) {
      ReferrerMoves& moved = (*moves)[&relation][pair.first];
      (want ? moved.joined : moved.left).insert(pair.second);
    }
  }
  return Status::Ok();
}

}  // namespace

Status ReconcileLinkedRows(StoreTransaction& txn, const LinkedCandidates& candidates,
                           RelationMoves* moves) {
  std::set<const Relation*> relations;
  for (const auto& entry : candidates.pairs) relations.insert(entry.first);
  for (const auto& entry : candidates.entities) relations.insert(entry.first);
  std::map<EntityKey, ReferenceIndex::OwnedRows> writes;
  static const std::set<Pair> kNoPairs;
  static const std::set<std::string> kNoEntities;
  for (const Relation* relation : relations) {
    auto pairs = candidates.pairs.find(relation);
    auto entities = candidates.entities.find(relation);
    DENORMD_RETURN_IF_ERROR(ReconcileRelation(
        txn, *relation, pairs == candidates.pairs.end() ? kNoPairs : pairs->second,
        entities == candidates.entities.end() ? kNoEntities : entities->second, &writes, moves));
  }
  if (writes.empty()) return Status::Ok();
  std::vector<ReferenceIndex::OwnedRows> rows;
  for (auto& entry : writes) rows.push_back(std::move(entry.second));
  return txn.index().WriteRows(rows);
}

}  // namespace denormd
