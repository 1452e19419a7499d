#include "projections/derivations/children.h"

#include <algorithm>

namespace denormd {

void AddParentsOfChild(const Relation& via, size_t projection, const EntityChange& change,
                       bool payload, AffectedUnits* out) {
  const std::vector<std::string> before = via.TargetsOf(*change.before);
  const std::vector<std::string> after = via.TargetsOf(*change.after);
  for (const auto* list : {&before, &after}) {
    const std::vector<std::string>& other = list == &before ? after : before;
    for (const std::string& parent : *list) {
      if (payload || !std::binary_search(other.begin(), other.end(), parent)) {
        out->AddUnit(projection, parent);
      }
    }
  }
}

}  // namespace denormd
