// Derivation: how one derived field of an entity projection is kept
// ({count: ...}, {ids: ...}, {embed: ...}, {lookup: ...}, and the scalar
// path / template / value fields).
//
// Each kind lives in one file under projections/derivations/ and answers, for
// its fields, every question the engine asks:
//   * how it is written in the config (DerivationSyntax::Parse),
//   * which relations of the reference index it reads (Bind, through the
//     PlanBuilder, which hands out the typed Relation objects),
//   * which documents a change of a related entity affects (CollectAffected),
//   * what it reads for a set of documents, in one store call (Read),
//   * the value it renders for one document (Render),
//   * and that value by its definition, from the source rows alone, for
//     `verify` (Define).
// Adding a kind means its own file, a line in derivations/registry.cc, its
// documentation and its tests.
//
// Derivations are created by the ProjectionPlan, immutable, and safe to use
// from several threads at once.
#ifndef DENORMD_PROJECTIONS_DERIVATION_H_
#define DENORMD_PROJECTIONS_DERIVATION_H_

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "config/derivation_syntax.h"
#include "projections/affected.h"
#include "projections/entity.h"
#include "projections/json.h"
#include "projections/relation.h"
#include "projections/source_view.h"
#include "projections/store.h"

namespace denormd {

// What a derivation read for a set of documents, kept until they render.
class DerivationReads {
 public:
  virtual ~DerivationReads() = default;
};

class Derivation {
 public:
  virtual ~Derivation() = default;

  // The entity types whose changes this derivation must hear about (through
  // CollectAffected); none for a field that depends only on its root.
  virtual std::vector<std::string> DependsOn() const { return {}; }

  // Adds to `out` the documents (of its projection) whose value may differ
  // after `change`, an entity of one of the DependsOn() types, and any keys
  // to lock before they are recomputed.
  virtual void CollectAffected(const EntityChange& change, AffectedUnits* out) const {
    (void)change;
    (void)out;
  }

  // Reads what the field needs for `roots` (live), with one store call for
  // all of them. *out may stay null when nothing is read.
  virtual Status Read(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
                      std::unique_ptr<DerivationReads>* out) const {
    (void)txn;
    (void)roots;
    out->reset();
    return Status::Ok();
  }

  // The same within a batch, which knows the referrers its own changes
  // moved (`moves`, AffectedUnits::moves): a derivation may then start from
  // the stored document, which the batch's locks keep current, and apply
  // the moves instead of reading every referrer.
  virtual Status ReadInBatch(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
                             const RelationMoves& moves,
                             std::unique_ptr<DerivationReads>* out) const {
    (void)moves;
    return Read(txn, roots, out);
  }

  // Tells the store what ReadInBatch will read for the roots `ids` (hints:
  // Projection::ReadAhead). Nothing by default.
  virtual void ReadAhead(StoreTransaction& txn, const std::vector<std::string>& ids) const {
    (void)txn;
    (void)ids;
  }

  // The field's value for `root`; false when it is missing (the field is
  // then left out of the document).
  virtual bool Render(const EntityRecord& root, const DerivationReads* reads, JsonValue* out,
                      JsonAllocator& allocator) const = 0;

  // The field's value for `root` by its definition, from the source rows
  // alone: `verify`'s recomputation (projections/source_view.h). Reads the
  // spec as the config wrote it, never the plan's relations, the reference
  // index, its counters or stored documents, so that it can catch them
  // wrong. May ask `source` for entities it has not loaded yet; Gather runs
  // it again once they are. False when the field is missing.
  virtual bool Define(const EntityRecord& root, SourceView& source, JsonValue* out,
                      JsonAllocator& allocator) const = 0;
};

// What a kind binds a parsed spec with: the projection the field belongs to,
// and the relations it reads.
class PlanBuilder {
 public:
  virtual ~PlanBuilder() = default;
  // The projection being planned, and its index in Config::projections.
  virtual const ProjectionConfig& projection() const = 0;
  virtual size_t projection_index() const = 0;
  // The name of the field being bound (a top-level key of the documents).
  virtual const std::string& field() const = 0;
  // The relation of `entity_type` through `path`: the one Relation object
  // the plan keeps for it, whose rows the reference index stores for every
  // entity of that type. `order` is the order the caller reads the members
  // in: an OrderBy (absent: by id), which it then gets exactly; or null when
  // any order will do (the caller only counts, or sorts what it shows
  // itself), and it may get a relation kept in another field's order.
  virtual const Relation& UseRelation(const std::string& entity_type, const Path& path,
                                      const OrderBy* order, Relation::Flavour flavour) = 0;
  // The link through `link_type` whose rows name the document's side in
  // `from` and the other side in `to`: the one Link object the plan keeps
  // for it, built on the two relations of the link type.
  virtual const Link& UseLink(const std::string& link_type, const Path& from,
                              const Path& to) = 0;
  // The relation of `target_type` through `link` (Relation::Flavour::
  // kLinked): a row per live entity of that type and `from` id a live link
  // row pairs it with, kept by projections/linked_rows.h; by id, or in
  // `order` of the linked entities' fields, or in `link_order` of the link
  // rows' fields (at most one of the two present).
  virtual const Relation& UseLinkedRelation(const Link& link, const std::string& target_type,
                                            const OrderBy* order = nullptr,
                                            const OrderBy* link_order = nullptr) = 0;
};

// A derivation kind: its syntax (config/derivation_syntax.h) and how a
// parsed spec becomes the Derivation of one field of one plan.
class DerivationKind : public DerivationSyntax {
 public:
  // `spec` was returned by this kind's Parse; it outlives the derivation.
  virtual std::unique_ptr<Derivation> Bind(const DerivationSpec& spec,
                                           PlanBuilder& plan) const = 0;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_DERIVATION_H_
