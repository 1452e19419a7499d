// The rows of the relations kept through a link (Relation::Flavour::kLinked).
//
// For `{count: book, through: book_author, from: author_id, to: book_id}` the
// plan keeps the relation "through book_author from author_id to book_id" of
// type book: a row (target a, id b) for each live book b and each author id a
// that at least one live book_author row pairs with b. Each linked entity is
// one row however many link rows pair it, and a dangling link (no live b) is
// none: what a document through a link shows, as rows of the reference index.
// So count, ids and lookup through a link read it as they read a `via`
// relation (a counter, a splice of the stored list, the first N by index),
// and a change costs what it changes, not what the document is linked to.
//
// The rows are not a function of their owner's data, so they are reconciled
// against the store for candidate pairs (a, b): each pair a changed link row
// names before or after the batch, and every pair of a b whose liveness
// changed (read from the link rows naming it: one per document it affects
// anyway). A pair's row should exist iff b is live and a live link row
// names the pair (ReadLinkedPairs, from the link rows' own index rows); its
// sort key is empty (by id), the entity's (an order of its fields), or the
// pair's first link row's (an order of the link rows' fields, read from a
// kPairs relation in that order). The stored row is not read: the row the
// pair should have is added, and removed under every other sort key it may
// have been written with (ReferenceIndex::WriteRows changes only what
// differs, moves the counters by that, and says what changed, which is
// recorded as moves). A pair a batch's own changed link row names now is
// linked without a read. A batch pays, per relation, at most three reads
// for all of its candidates (the link rows naming the entities created or
// deleted, the entities, the pairs' links; one more when a link side has
// rows of arrays), and one write for all relations, each O(candidates).
//
// Concurrency: the caller holds the lock of every b it reconciles, as the
// BatchApplier does (a link row's `to` ids before and after the batch are
// phase-2 locks; an entity's own key is a phase-1 lock), so two batches
// deciding the row of one pair serialize, and the second reads the first's
// committed link rows, index rows and liveness.
#ifndef DENORMD_PROJECTIONS_LINKED_ROWS_H_
#define DENORMD_PROJECTIONS_LINKED_ROWS_H_

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "projections/affected.h"
#include "projections/entity.h"
#include "projections/relation.h"
#include "projections/store.h"

namespace denormd {

// What to reconcile, per kLinked relation.
struct LinkedCandidates {
  // (from id, to id) pairs
  std::map<const Relation*, std::set<std::pair<std::string, std::string>>> pairs;
  // to ids (of the relation's type) all of whose pairs are reconciled
  std::map<const Relation*, std::set<std::string>> entities;
  // An ordered relation's stored row sorts as its entity (or, in a link
  // order, its pair's first link row) did when the row was written: the
  // states the changed entities had before (or between) the changes being
  // reconciled, so that the row is found under its old sort key.
  std::map<EntityKey, std::vector<EntityState>> earlier;
  // In a link order: how many changed link rows name each pair now (the
  // pair's first rows that may have displaced the one its row sorted by).
  std::map<const Relation*, std::map<std::pair<std::string, std::string>, size_t>> changed_rows;
  // Set before adding changes whose `after` is each entity's stored state
  // now (a batch's own changes, under their phase-1 locks; not a journal's):
  // then the pairs a changed live link row names are linked without a read.
  bool afters_are_current = false;
  // Those pairs, per relation not in a link order (afters_are_current
  // only; in a link order the pair's first rows are read anyway).
  std::map<const Relation*, std::set<std::pair<std::string, std::string>>> linked_now;
  bool empty() const { return pairs.empty() && entities.empty(); }
};

// Adds the candidates `change` makes for the relations of `linked` (a plan's
// kLinked relations): a link row's pairs that it gained or lost (all of its
// pairs when its sort key in a relation's link order changed); an entity of a
// relation's type that was created or deleted (or, in an order of its
// fields, whose sort key changed).
void AddLinkedCandidates(const std::vector<const Relation*>& linked, const EntityChange& change,
                         LinkedCandidates* out);

// AddLinkedCandidates for each of `changes`.
void AddLinkedCandidates(const std::vector<const Relation*>& linked,
                         const std::vector<EntityChange>& changes, LinkedCandidates* out);

// Adds every pair of the entities `keys` of the types of `linked`: after
// their index rows were replaced (a reindex removes every row of an entity).
void AddLinkedEntities(const std::vector<const Relation*>& linked,
                       const std::vector<EntityKey>& keys, LinkedCandidates* out);

// Makes the candidates' rows what the link rows and the entities say, in
// `txn`; records in *moves (when not null) the ids that joined or left each
// from id.
Status ReconcileLinkedRows(StoreTransaction& txn, const LinkedCandidates& candidates,
                           RelationMoves* moves);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_LINKED_ROWS_H_
