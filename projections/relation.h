// Relation: one kind of reference the reference index stores, handed out by
// the ProjectionPlan and held by whoever reads it (derivations, buckets).
//
// A relation says which ids an entity of `entity_type()` names through one
// path of its data, and in which order those referrers are kept: for every
// (entity, named id) the index holds a row (relation, target, sort key, id),
// so the store can count, order and page the referrers of a target by index.
//
// Four flavours:
//   kReferences  the string at the path, or the strings of the array there
//                (count, ids, embed: `via`; lookup: `by`)
//   kGroup       only a string value (bucket groups: `by`)
//   kPairs       of a link entity: every (from, to) pair it names, as one
//                target (PairKey), in a link order: a pair's first row
//                sorts it (Link::pairs). No counters: nothing counts a
//                pair's link rows
//   kLinked      of the entity a link names in `to`: a row names the `from`
//                id of a live link row naming it. Not read from the
//                entity's own data (Targets is empty): the rows are kept by
//                projections/linked_rows.h from the link rows and the
//                entity's liveness (Link::LinkedRelation)
//
// A Relation is created once per distinct (type, path, order, flavour) by the
// plan; its name() is what the store keeps in its rows and is never
// re-spelled elsewhere. Immutable; borrows the Config's paths (and the
// plan's orders of link sides).
//
// A Link is a join table: a link entity type whose rows name one entity in
// `from` and another in `to` (book_author: book_id, author_id). It is two
// kReferences relations of the link type, so the index keeps link rows like
// any other referrer, each in the order of the other side's value, so that
// a row holds both ids (ReadLinksTo reads keys only); the plan hands out one
// Link per (type, from, to).
#ifndef DENORMD_PROJECTIONS_RELATION_H_
#define DENORMD_PROJECTIONS_RELATION_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "projections/entity.h"
#include "projections/json.h"

namespace denormd {

class Link;

class Relation {
 public:
  enum class Flavour { kReferences, kGroup, kPairs, kLinked };

  Relation(std::string entity_type, const Path& path, const OrderBy* order, Flavour flavour);
  // One side of a link (kReferences of the link type at `path`), its rows
  // in the ascending order of the other side's value (`other`), so that a
  // row holds both ids. Its own relation, whatever else reads the path, so
  // that it keeps no counters in any model.
  static std::unique_ptr<Relation> LinkSide(std::string link_type, const Path& path,
                                            const OrderBy& other);
  // A kPairs relation of a link type over its `from` and `to` paths, its
  // rows in `order` of the link rows (null: by id).
  static std::unique_ptr<Relation> Pairs(std::string link_type, const Path& from, const Path& to,
                                         const OrderBy* order = nullptr);
  // The kLinked relation of `target_type` through `link`. Its rows are by
  // id; or in `order` of the linked entity's fields; or, with
  // `ordered_pairs` (a kPairs relation of the link in `order`), in `order`
  // of the link rows' fields: a row sorts as the first link row of its pair.
  static std::unique_ptr<Relation> Linked(std::string target_type, const Link& link,
                                          const OrderBy* order = nullptr,
                                          const Relation* ordered_pairs = nullptr);

  // The name rows are stored under: the path, the order and the flavour
  // ("authorIds", "postId order -createdAt", "postId order createdAt group").
  const std::string& name() const { return name_; }
  const std::string& entity_type() const { return entity_type_; }
  const Path& path() const { return *path_; }
  // The referrers' order; null when by id.
  const OrderBy* order() const { return order_; }
  Flavour flavour() const { return flavour_; }
  // Whether the store keeps a count of each target's rows (ReferenceIndex::
  // Count): for every relation but a link's sides and pairs, which nothing
  // counts (a link's reads find rows, never count them).
  bool counted() const { return counted_; }
  // The link of a kLinked relation; null for the others.
  const Link* link() const { return link_; }
  // The `to` path of a kPairs relation (path() is its `from`); null for
  // the others.
  const Path* pair_to() const { return to_; }
  // A kLinked relation in an order of the link rows: its kPairs relation in
  // that order; null for the others (order() is then of the entity).
  const Relation* ordered_pairs() const { return ordered_pairs_; }

  // The ids an entity names (sorted, unique); empty when the path is absent.
  std::vector<std::string> Targets(const std::string& id, const JsonValue& data) const;
  // The same for a state that may be gone: none unless live.
  std::vector<std::string> TargetsOf(const EntityState& state) const;
  // An entity's sort key in this relation's order (OrderKey), "" by id.
  std::string SortKey(const std::string& id, const JsonValue& data) const;

 private:
  std::string entity_type_;
  const Path* path_;
  const OrderBy* order_;
  Flavour flavour_;
  std::string name_;
  const Path* to_ = nullptr;     // kPairs: the link's `to` path
  const Link* link_ = nullptr;   // kLinked
  const Relation* ordered_pairs_ = nullptr;  // kLinked in a link order
  bool counted_ = true;
};

class Link {
 public:
  Link(const Relation& from, const Relation& to, const Relation* pairs)
      : from_(from), to_(to), pairs_(pairs) {}

  const std::string& link_type() const { return from_.entity_type(); }
  // The link's field naming the document's side, and the other side.
  const Relation& from() const { return from_; }
  const Relation& to() const { return to_; }
  // Its (from, to) pairs (kPairs), in the link order a field keeps them in
  // (ProjectionPlan): one row of PairKey(f, t) per live link row naming
  // that pair. Null when no field keeps them in a link order: the `from`
  // side, sorted by the `to` value, tells whether a pair is linked
  // (ReadLinkedPairs), so a link row keeps no row for its pair.
  const Relation* pairs() const { return pairs_; }

  // The (from, to) pairs a state of a link row names (none unless live),
  // sorted and unique.
  std::vector<std::pair<std::string, std::string>> PairsOf(const EntityState& state) const;
  // The target of a pair in the kPairs relation: unambiguous for any two ids.
  static std::string PairKey(const std::string& from, const std::string& to);
  // The two ids of a PairKey; false when `key` is not one.
  static bool SplitPairKey(const std::string& key, std::string* from, std::string* to);

  // The `from` ids whose linked `to` ids differ between two states of a link
  // row (it appeared, went, or changed either field), sorted.
  std::vector<std::string> ChangedFrom(const EntityState& before,
                                       const EntityState& after) const;

 private:
  const Relation& from_;
  const Relation& to_;
  const Relation* pairs_;
};

// The ids a reference field names: the string, or the string elements of the
// array, at `path` in `data` (sorted, unique). Empty when absent.
std::vector<std::string> ReferenceTargets(const Path& path, const std::string& id,
                                          const JsonValue& data);

// The string at `path` (nullopt when absent or not a string).
std::optional<std::string> StringAt(const Path& path, const std::string& id,
                                    const JsonValue& data);

// An entity's sort key (OrderKey) for `order`; "" when there is no order
// (null or not present), i.e. ordered by id.
std::string SortKey(const OrderBy* order, const std::string& id, const JsonValue& data);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_RELATION_H_
