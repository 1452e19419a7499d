// AffectedUnits: what a batch must recompute, collected from its entity
// changes by the projections and derivations that depend on them.
//
// A unit is what is recomputed as a whole: for an entity projection the
// document of one root id; for a bucket projection one group, with the
// member changes that say which of its buckets moved.
#ifndef DENORMD_PROJECTIONS_AFFECTED_H_
#define DENORMD_PROJECTIONS_AFFECTED_H_

#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "projections/relation.h"
#include "projections/store.h"

namespace denormd {

// One member of a bucket group changed by a batch: where it sat in the
// group's order before (absent: it was not in the group) and sits now
// (absent: it left), and whether what its bucket shows of it changed.
struct MemberChange {
  std::string id;
  std::optional<IndexKey> before;
  std::optional<IndexKey> after;
  bool item_changed = false;
};

// Member changes per group value.
using GroupChanges = std::map<std::string, std::vector<MemberChange>>;

// The referrers (by id) that joined or left one target of a relation.
struct ReferrerMoves {
  std::set<std::string> joined;
  std::set<std::string> left;
};

// What one batch's own changes (each entity once, as it was before the batch
// and is after it) moved, per relation and target; a target nothing moved
// is absent. Complete only for the relations a derivation asked for
// (AddParentsOfChild with record_moves, derivations/children.h).
using RelationMoves = std::map<const Relation*, std::map<std::string, ReferrerMoves>>;

struct AffectedUnits {
  // projection index -> root ids (entity projections) or groups (buckets)
  std::map<size_t, std::set<std::string>> units;
  // bucket projection index -> its groups' member changes (a group listed
  // here is also in `units`)
  std::map<size_t, GroupChanges> group_changes;
  // Documents found through the reference index: for each relation, the
  // referrers of these targets are units of the projection (resolved in one
  // read per relation by the BatchApplier).
  std::map<const Relation*, std::map<size_t, std::set<std::string>>> referrers_of;
  // Documents found two steps away, through link rows: for each link, the
  // ids its rows name in `from`, where their `to` names one of these
  // targets, are units of the projection (one read per link).
  std::map<const Link*, std::map<size_t, std::set<std::string>>> linked_to;
  // Keys to lock before recomputing (lookup targets of changed entities).
  std::vector<std::string> locks;
  // The referrers that moved, for the derivations that splice their stored
  // value instead of reading every referrer ({ids: ...}).
  RelationMoves moves;

  void AddUnit(size_t projection, const std::string& unit) { units[projection].insert(unit); }
  void AddReferrersOf(const Relation& relation, size_t projection, const std::string& target) {
    referrers_of[&relation][projection].insert(target);
  }
  void AddLinkedTo(const Link& link, size_t projection, const std::string& target) {
    linked_to[&link][projection].insert(target);
  }

  // Adds what `other` collected (from other changes), as if it had been
  // collected here after what is here already.
  void Merge(AffectedUnits&& other) {
    for (auto& entry : other.units) units[entry.first].merge(entry.second);
    for (auto& entry : other.group_changes) {
      GroupChanges& mine = group_changes[entry.first];
      for (auto& group : entry.second) {
        std::vector<MemberChange>& list = mine[group.first];
        list.insert(list.end(), std::make_move_iterator(group.second.begin()),
                    std::make_move_iterator(group.second.end()));
      }
    }
    for (auto& entry : other.referrers_of) {
      for (auto& projection : entry.second) {
        referrers_of[entry.first][projection.first].merge(projection.second);
      }
    }
    for (auto& entry : other.linked_to) {
      for (auto& projection : entry.second) {
        linked_to[entry.first][projection.first].merge(projection.second);
      }
    }
    locks.insert(locks.end(), std::make_move_iterator(other.locks.begin()),
                 std::make_move_iterator(other.locks.end()));
    for (auto& entry : other.moves) {
      for (auto& target : entry.second) {
        ReferrerMoves& mine = moves[entry.first][target.first];
        mine.joined.merge(target.second.joined);
        mine.left.merge(target.second.left);
      }
    }
  }
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_AFFECTED_H_
