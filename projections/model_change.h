// ModelChange: what changing the model (entities and projections) from one
// configuration to another means for the store, before anything is done:
// the projections added, removed and changed (and how), the collections
// built anew or dropped, the reference-index relations to build or drop.
//
// `denormd plan` prints it; `denormd apply` acts on it. The unit of work is
// the collection: a collection is rebuilt when any projection writing it is
// added, removed or changed (its other projections are rebuilt with it, in
// the same new table); collections none of whose projections changed are
// left alone.
#ifndef DENORMD_PROJECTIONS_MODEL_CHANGE_H_
#define DENORMD_PROJECTIONS_MODEL_CHANGE_H_

#include <string>
#include <vector>

#include "config/config.h"

namespace denormd {

struct ProjectionChange {
  enum class Kind { kAdded, kRemoved, kChanged };
  std::string name;
  std::string collection;  // the new one (the old one when removed)
  Kind kind = Kind::kChanged;
  // What changed, one line each: "field author_name added (path)",
  // "field books changed: count via books.authorId -> ids via ...",
  // "size: 100 -> 50". Empty unless kChanged.
  std::vector<std::string> details;
};

struct ModelChange {
  std::vector<std::string> entities_added;
  std::vector<std::string> entities_removed;
  std::vector<ProjectionChange> projections;  // in the new file's order, then the removed
  std::vector<std::string> collections_rebuilt;  // new or changed, ascending
  std::vector<std::string> collections_dropped;  // only in the old model, ascending
  // Reference-index relations, "<entity type> <relation name>", ascending.
  std::vector<std::string> relations_added;
  std::vector<std::string> relations_dropped;

  bool empty() const {
    return entities_added.empty() && entities_removed.empty() && projections.empty() &&
           collections_rebuilt.empty() && collections_dropped.empty() &&
           relations_added.empty() && relations_dropped.empty();
  }
};

ModelChange CompareModels(const Config& before, const Config& after);

const char* ProjectionChangeKindName(ProjectionChange::Kind kind);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_MODEL_CHANGE_H_
