#include "projections/derivations/children.h"

#include <algorithm>

namespace denormd {

void AddParentsOfChild(const Relation& via, size_t projection, const EntityChange& change,
                       bool payload, AffectedUnits* out, bool record_moves) {
  const std::vector<std::string> before = via.TargetsOf(*change.before);
  const std::vector<std::string> after = via.TargetsOf(*change.after);
  for (const auto* list : {&before, &after}) {
    const std::vector<std::string>& other = list == &before ? after : before;
    for (const std::string& parent : *list) {
      const bool moved = !std::binary_search(other.begin(), other.end(), parent);
      if (payload || moved) out->AddUnit(projection, parent);
      if (record_moves && moved) {
        ReferrerMoves& moves = out->moves[&via][parent];
        (list == &before ? moves.left : moves.joined).insert(change.key.id);
      }
    }
  }
}

}  // namespace denormd
