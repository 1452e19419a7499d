#include "projections/linked_rows.h"

#include <algorithm>
#include <iterator>

#include "projections/reference_index.h"

namespace denormd {

void AddLinkedCandidates(const std::vector<const Relation*>& linked, const EntityChange& change,
                         LinkedCandidates* out) {
  for (const Relation* relation : linked) {
    const Link& link = *relation->link();
    const Relation* ordered_pairs = relation->ordered_pairs();
    if (change.key.type == link.link_type()) {
      const auto before = link.PairsOf(*change.before);
      const auto after = link.PairsOf(*change.after);
      std::vector<std::pair<std::string, std::string>> changed;
      const bool resorted =
          ordered_pairs != nullptr && IsLive(*change.before) && IsLive(*change.after) &&
          ordered_pairs->SortKey(change.key.id, *(*change.before)->data) !=
              ordered_pairs->SortKey(change.key.id, *(*change.after)->data);
      if (resorted) {
        std::set_union(before.begin(), before.end(), after.begin(), after.end(),
                       std::back_inserter(changed));
      } else {
        std::set_symmetric_difference(before.begin(), before.end(), after.begin(), after.end(),
                                      std::back_inserter(changed));
      }
      if (!changed.empty()) out->pairs[relation].insert(changed.begin(), changed.end());
      // Read only where a pair's links are asked (no link order).
      if (out->afters_are_current && ordered_pairs == nullptr && IsLive(*change.after)) {
        out->linked_now[relation].insert(after.begin(), after.end());
      }
      if (ordered_pairs != nullptr) {
        for (const auto& pair : after) out->changed_rows[relation][pair]++;
        out->earlier[change.key].push_back(*change.before);
      }
    }
    if (change.key.type == relation->entity_type()) {
      const bool was = IsLive(*change.before), is = IsLive(*change.after);
      const bool entity_order = relation->order() != nullptr && ordered_pairs == nullptr;
      const bool resorted =
          entity_order && was && is &&
          relation->SortKey(change.key.id, *(*change.before)->data) !=
              relation->SortKey(change.key.id, *(*change.after)->data);
      if (was != is || resorted) out->entities[relation].insert(change.key.id);
      if (entity_order) out->earlier[change.key].push_back(*change.before);
    }
  }
}

void AddLinkedCandidates(const std::vector<const Relation*>& linked,
                         const std::vector<EntityChange>& changes, LinkedCandidates* out) {
  for (const EntityChange& change : changes) AddLinkedCandidates(linked, change, out);
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

// Whether each reconciled pair should have a row, by relation.
using WantedPairs = std::map<std::pair<const Relation*, Pair>, bool>;

// Reconciles the rows of one kLinked relation for `pairs` and every pair of
// `entities`; appends the writes to *writes (by owner) and to *wants
// whether each pair should have a row.
Status ReconcileRelation(StoreTransaction& txn, const Relation& relation, std::set<Pair> pairs,
                         const std::set<std::string>& entities,
                         const LinkedCandidates& candidates,
                         std::map<EntityKey, ReferenceIndex::OwnedRows>* writes,
                         WantedPairs* wants) {
  const Link& link = *relation.link();
  const Relation* ordered_pairs = relation.ordered_pairs();
  const bool entity_order = relation.order() != nullptr && ordered_pairs == nullptr;
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
  // Each pair's `to` entity, if live.
  std::set<std::string> to_ids;
  for (const Pair& pair : pairs) to_ids.insert(pair.second);
  std::vector<EntityKey> keys;
  for (const std::string& id : to_ids) keys.push_back({relation.entity_type(), id});
  std::vector<EntityRecord> records;
  DENORMD_RETURN_IF_ERROR(txn.source().LoadEntities(keys, &records));
  std::map<std::string, EntityRecord> live;
  for (EntityRecord& record : records) {
    if (record.live()) live.emplace(record.key.id, std::move(record));
  }
  // The sort keys each pair's stored row may have: `probe`; and the one it
  // should have: `sort`.
  std::map<Pair, std::set<std::string>> probe;
  std::map<Pair, std::string> sort;
  for (const Pair& pair : pairs) {
    auto entity = live.find(pair.second);
    if (entity_order) {
      if (entity != live.end()) {
        sort[pair] = relation.SortKey(pair.second, *entity->second.data);
        probe[pair].insert(sort[pair]);
      }
      auto earlier = candidates.earlier.find({relation.entity_type(), pair.second});
      if (earlier == candidates.earlier.end()) continue;
      for (const EntityState& state : earlier->second) {
        if (IsLive(state)) probe[pair].insert(relation.SortKey(pair.second, *state->data));
      }
    } else if (ordered_pairs == nullptr) {
      probe[pair].insert("");
    }
  }
  // Whether a live link row links each pair not known to be linked
  // (ReadLinkedPairs: link rows keep no counters); in a link order, the
  // pair's first rows, which also give its sort key.
  std::map<std::string, uint64_t> counts;
  if (ordered_pairs == nullptr) {
    static const std::set<Pair> kNone;
    auto now = candidates.linked_now.find(&relation);
    const std::set<Pair>& linked_now = now == candidates.linked_now.end() ? kNone : now->second;
    std::vector<LinkedPair> asked;
    for (const Pair& pair : pairs) {
      if (!live.count(pair.second) || linked.count(pair)) continue;
      if (linked_now.count(pair)) {
        linked.insert(pair);
      } else {
        asked.push_back({pair.first, pair.second});
      }
    }
    std::set<LinkedPair> found;
    DENORMD_RETURN_IF_ERROR(ReadLinkedPairs(txn.index(), link, asked, &found));
    for (const LinkedPair& pair : found) counts[Link::PairKey(pair.from, pair.to)] = 1;
  } else {
    // The row sorted as the pair's first link row when it was written: one
    // of the pair's first k+1 rows now (k: the changed rows naming it), or
    // a changed row as it was.
    static const std::map<Pair, size_t> kNone;
    auto changed = candidates.changed_rows.find(&relation);
    const auto& changed_rows = changed == candidates.changed_rows.end() ? kNone : changed->second;
    size_t first = 1;
    std::vector<std::string> keys_of_pairs;
    for (const Pair& pair : pairs) {
      keys_of_pairs.push_back(Link::PairKey(pair.first, pair.second));
      auto k = changed_rows.find(pair);
      if (k != changed_rows.end()) first = std::max(first, k->second + 1);
    }
    std::vector<Referrer> rows;
    DENORMD_RETURN_IF_ERROR(ReadFirstReferrers(txn.index(), *ordered_pairs, keys_of_pairs, first,
                                               ReferenceIndex::Read::kKeys, &rows));
    const auto by_pair = GroupByTarget(rows);
    for (const Pair& pair : pairs) {
      auto found = by_pair.find(Link::PairKey(pair.first, pair.second));
      if (found == by_pair.end()) continue;
      counts[found->first] = found->second.size();
      sort[pair] = found->second.front()->sort;
      for (const Referrer* row : found->second) probe[pair].insert(row->sort);
    }
    for (const auto& entry : candidates.earlier) {
      if (entry.first.type != link.link_type()) continue;
      for (const EntityState& state : entry.second) {
        if (!IsLive(state)) continue;
        const std::string key = ordered_pairs->SortKey(entry.first.id, *state->data);
        for (const Pair& pair : link.PairsOf(state)) {
          if (pairs.count(pair)) probe[pair].insert(key);
        }
      }
    }
  }
  // The writes, without reading the stored rows first: the row the pair
  // should have is added and every other key its row may have been written
  // with is removed; a row added that exists, or removed that does not,
  // changes nothing (ReferenceIndex::WriteRows), and what did change says
  // which pairs joined or left (ReconcileLinkedRows).
  for (const Pair& pair : pairs) {
    const bool want =
        live.count(pair.second) &&
        (linked.count(pair) || counts[Link::PairKey(pair.first, pair.second)] > 0);
    const std::string wanted = sort.count(pair) ? sort[pair] : "";
    (*wants)[{&relation, pair}] = want;
    const std::set<std::string>& keys = probe[pair];
    if (!want && keys.empty()) continue;  // no row it should have, none it may have
    const EntityKey owner{relation.entity_type(), pair.second};
    ReferenceIndex::OwnedRows& write = (*writes)[owner];
    write.owner = owner;
    for (const std::string& key : keys) {
      if (!(want && key == wanted)) write.removed.push_back({&relation, pair.first, key});
    }
    if (want) write.added.push_back({&relation, pair.first, wanted});
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
  WantedPairs wanted;
  static const std::set<Pair> kNoPairs;
  static const std::set<std::string> kNoEntities;
  for (const Relation* relation : relations) {
    auto pairs = candidates.pairs.find(relation);
    auto entities = candidates.entities.find(relation);
    DENORMD_RETURN_IF_ERROR(ReconcileRelation(
        txn, *relation, pairs == candidates.pairs.end() ? kNoPairs : pairs->second,
        entities == candidates.entities.end() ? kNoEntities : entities->second, candidates,
        &writes, &wanted));
  }
  if (writes.empty()) return Status::Ok();
  std::vector<ReferenceIndex::OwnedRows> rows;
  for (auto& entry : writes) rows.push_back(std::move(entry.second));
  std::vector<ReferenceIndex::WrittenRow> written;
  DENORMD_RETURN_IF_ERROR(txn.index().WriteRows(rows, moves != nullptr ? &written : nullptr));
  if (moves == nullptr) return Status::Ok();
  // A pair that should have a row joined if its row was inserted and none
  // removed (else it had one: the row it should have, or one under an old
  // sort key); a pair that should have none left if a row was removed.
  std::map<std::pair<const Relation*, Pair>, std::pair<bool, bool>> changed;  // inserted, removed
  for (const ReferenceIndex::WrittenRow& row : written) {
    auto& entry = changed[{row.relation, {row.target, row.id}}];
    (row.added ? entry.first : entry.second) = true;
  }
  for (const auto& entry : changed) {
    auto want = wanted.find(entry.first);
    if (want == wanted.end()) {
      return Status::Fatal("internal: a row kept through a link was written for a pair "
                           "that was not reconciled");
    }
    const bool inserted = entry.second.first, removed = entry.second.second;
    if (want->second ? (inserted && !removed) : removed) {
      const Pair& pair = entry.first.second;
      ReferrerMoves& moved = (*moves)[entry.first.first][pair.first];
      (want->second ? moved.joined : moved.left).insert(pair.second);
    }
  }
  return Status::Ok();
}

}  // namespace denormd
