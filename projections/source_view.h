// SourceView: the stored source rows, grouped and ordered the way the config
// says, with no help from anything the incremental path maintains: not the
// reference index nor its counters, not the plan's relations, not the stored
// documents nor the bucket member keys. `verify` recomputes every document
// through it, by each projection's definition (Derivation::Define,
// Projection::VerifyFromSource), so that a fault in those structures, or in
// the plan that chose them, shows as a difference instead of being reproduced.
//
// What it costs: the first question about the referrers through one
// (type, path) reads every source row of that type once, in pages, and keeps
// target -> referrer ids in memory (a few dozen bytes per referrer), for both
// namings of the path. Entities
// are then loaded by id, a page of documents at a time, in rounds (Gather):
// a definition asks for what it needs; what is not loaded yet is noted as
// missing, loaded in one call, and the definition runs again.
//
// Not thread-safe; lives inside one read transaction.
#ifndef DENORMD_PROJECTIONS_SOURCE_VIEW_H_
#define DENORMD_PROJECTIONS_SOURCE_VIEW_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "config/config.h"
#include "projections/entity.h"
#include "projections/store.h"

namespace denormd {

class SourceView {
 public:
  // How a field names other entities: a string or an array of strings
  // (references: `via`, `by`, a link's `from` and `to`), or a string only
  // (bucket groups).
  enum class Naming { kReferences, kString };

  explicit SourceView(StoreTransaction& txn) : txn_(txn) {}

  // The ids of the entities of `type` whose field at `path` names `target`,
  // ascending (live entities only: a tombstone names nothing). Empty after
  // an error reading the source, which Gather then returns.
  const std::vector<std::string>& ReferrerIds(const std::string& type, const Path& path,
                                              Naming naming, const std::string& target);
  // Every id that field names in some live entity, ascending.
  Status Targets(const std::string& type, const Path& path, Naming naming,
                 std::vector<std::string>* out);

  // The live entity, or null when it is absent or deleted -- or not loaded
  // yet, which is noted for the next round of Gather.
  const EntityRecord* Entity(const std::string& type, const std::string& id);
  // Entity() for each id, the live ones in the order of `ids`.
  std::vector<const EntityRecord*> Entities(const std::string& type,
                                            const std::vector<std::string>& ids);

  // Through link rows of `link_type`: the ids its live rows name in the
  // field at `other` while naming `id` in the field at `side`, ascending and
  // unique (whether or not those entities are live).
  std::vector<std::string> Paired(const std::string& link_type, const Path& side,
                                  const std::string& id, const Path& other);

  // Paired(), ordered as each id's first link row (the least of the rows
  // pairing it) sorts in `order` of the link rows' fields, ties by id.
  std::vector<std::string> PairedInLinkOrder(const std::string& link_type, const Path& side,
                                             const std::string& id, const Path& other,
                                             const OrderBy& order);

  // Runs `define` until it asked for nothing that was not loaded, loading
  // what it missed after each run (at most a few rounds: a definition reads
  // at most three steps away from its root). Entities loaded in earlier
  // pages are dropped first, so memory stays bounded by one page.
  Status Gather(const std::function<Status()>& define);

  // Calls `visit` with consecutive chunks of `units` (each calling Gather),
  // sized so that a chunk loads about kLoadBudget entities: the first is one
  // unit; a chunk that loaded more halves the next, one that loaded less
  // than a quarter of it doubles it, up to kMaxChunk units. Memory then follows the budget, or the
  // largest single unit (a post whose embed must sort all its comments).
  static constexpr size_t kLoadBudget = 20000;
  static constexpr size_t kMaxChunk = 1000;
  Status ForEachChunk(const std::vector<std::string>& units,
                      const std::function<Status(const std::vector<std::string>& chunk)>& visit);

  // The ids a field names in `data` (the string there, or the strings of the
  // array there, per `naming`), ascending and unique.
  static std::vector<std::string> NamedIds(const Path& path, Naming naming, const std::string& id,
                                           const JsonValue& data);

 private:
  using GroupKey = std::tuple<std::string, std::string, Naming>;  // type, path, naming
  using Groups = std::map<std::string, std::vector<std::string>>;  // target -> ids
  Status GroupsOf(const std::string& type, const Path& path, Naming naming, const Groups** out);

  StoreTransaction& txn_;
  std::map<GroupKey, Groups> groups_;
  std::map<EntityKey, EntityRecord> loaded_;  // live or not; absent keys as deleted records
  std::set<EntityKey> missing_;
  Status error_;  // the first failed read of a round
};

// The order `order_by` puts two entities in, as docs/configuration.md states
// it (written here from that text, apart from OrderKey's encoding, so that
// verify checks the encoding instead of sharing it): a present value before
// an absent one (no field, or JSON null) in either direction; numbers <
// strings < booleans < arrays < objects; numbers by value, strings by their
// bytes, false < true, arrays and objects equal among themselves;
// `descending` reverses present values; ties by id, ascending. Without an
// order (not present): by id.
bool OrderedBefore(const OrderBy& order, const EntityRecord& a, const EntityRecord& b);

// Sorts entities by OrderedBefore.
void SortAsConfigured(const OrderBy& order, std::vector<const EntityRecord*>* entities);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_SOURCE_VIEW_H_
