// What count, ids and lookup share when they go through a link entity (a
// join table) instead of a reference field:
//
//   {count: book, through: book_author, from: author_id, to: book_id}
//
// A document of entity X is linked to entity Y when a live row of the link
// type names X in `from` and Y in `to` (each a string or an array of
// strings); the derivation shows the live linked entities, each once however
// many rows link the pair, in ascending id order. The link rows are ordinary
// entities (versions, tombstones), indexed by the relations of the Link.
//
// What a document is linked to is read from the relation the plan keeps
// through the link (Relation::Flavour::kLinked, projections/linked_rows.h):
// one row per live linked entity, so a count reads a counter and a list is
// spliced or read by index like a `via` relation's, whatever the linked set
// holds.
//
// How changes reach documents:
//   * a link row change: the `from` ids whose linked `to` ids changed
//     (Link::ChangedFrom); the `to` ids it names before and after are
//     locked, so that a concurrent change of such an entity either commits
//     first (and is read) or finds this row through the index after this
//     batch commits (the lookup case of BatchApplier::ApplyInTransaction,
//     one step further), and so that two batches deciding the linked row of
//     one pair serialize;
//   * a change of a linked entity that the derivation shows (liveness for
//     count and ids, the `select` for lookup): the documents its link rows
//     name in `from`, found through the `to` relation (AffectedUnits::
//     linked_to), never by a scan.
#ifndef DENORMD_PROJECTIONS_DERIVATIONS_LINKED_H_
#define DENORMD_PROJECTIONS_DERIVATIONS_LINKED_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "projections/derivation.h"

namespace denormd {

// Parsed `through: L, from: F, to: T [, order_by: O | link_order_by: O]`.
struct ThroughSpec {
  std::string link;  // the link entity type
  Path from;         // its field naming the document's entity
  Path to;           // its field naming the linked entity
  OrderBy order_by;       // of the linked entities' fields (ids, lookup, embed)
  OrderBy link_order_by;  // of the link rows' fields (idem); at most one present
  // "through L from F to T [order O | link order O]"
  std::string Normalized() const;
  bool ordered() const { return order_by.present || link_order_by.present; }
};

// Whether the map has `through`, `from` or `to`.
bool UsesThrough(const ExpressionReader& reader);

// Reads `through`, `from` and `to` when the map has any of them (then
// `alternative`, the key they replace, "via" or "by", must be absent), into
// *out; with `ordered`, `order_by` or `link_order_by` too. Leaves *out empty
// when it has none. False after reporting a problem.
bool ReadThrough(ExpressionReader& reader, const std::string& alternative,
                 std::optional<ThroughSpec>* out, bool ordered = false);

// Refuses `order_by`, `link_order_by` (and `limit`, unless `limit_ok`) in a
// `kind` ("ids", "a lookup") that does not go through a link (`why`: what it
// does instead).
// False after reporting.
bool RefuseOrderWithout(ExpressionReader& reader, const std::string& kind, const std::string& why,
                        bool limit_ok = true);

// What a derivation through a link reads for its documents.
struct LinkedReads : DerivationReads {
  std::map<std::string, std::vector<std::string>> linked;  // document id -> linked ids, ascending
  std::map<std::string, EntityRecord> live;                // linked id -> its live entity
};


// A derivation through a link: the entities of `target_type` that the
// documents of one projection are linked to through `spec`. Finds the
// affected documents and reads for them; the kinds render. Immutable.
class LinkedDerivation : public Derivation {
 public:
  // The documents show the linked entities in the spec's order (by id
  // without one), the first `limit`.
  LinkedDerivation(const ThroughSpec& spec, std::string target_type, PlanBuilder& plan,
                   std::optional<uint64_t> limit = std::nullopt);

  // The link type and the target type.
  std::vector<std::string> DependsOn() const final;
  void CollectAffected(const EntityChange& change, AffectedUnits* out) const final;
  // The live linked entities of `roots` (the first `limit`), with their
  // data, in order: one read of the linked relation. *out is a LinkedReads.
  Status Read(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
              std::unique_ptr<DerivationReads>* out) const override;

  // Renders from the linked entities (Show) that Read read.
  bool Render(const EntityRecord& root, const DerivationReads* reads, JsonValue* out,
              JsonAllocator& allocator) const override;
  // Renders from the linked ids found in the source rows of the link type
  // by the spec's `from` and `to`, for verify.
  bool Define(const EntityRecord& root, SourceView& source, JsonValue* out,
              JsonAllocator& allocator) const final;

 protected:
  // A linked id's live entity; null when it is absent or deleted.
  using TargetOf = std::function<const EntityRecord*(const std::string& id)>;

  // Whether what the field shows of a target differs between the states of
  // `change` (a change of the target type). By default: its liveness, or its
  // place in an order of its fields.
  virtual bool ShownChanged(const EntityChange& change) const;

  // The ids `roots` are linked to, dangling ones too, from their link rows
  // and a load of those ids (what a lookup that shows a missing target as
  // null reads; it costs the linked set). *out is a LinkedReads.
  Status ReadLinkRows(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
                      std::unique_ptr<DerivationReads>* out) const;

  // The field's value from the ids a document is linked to (ascending, each
  // once; from Read, the live ones; from ReadLinkRows and for verify, live
  // or not) and `target`.
  virtual bool Show(const std::vector<std::string>& linked, const TargetOf& target, JsonValue* out,
                    JsonAllocator& allocator) const = 0;

  // Whether Show reads the linked entities' data (else their ids only).
  virtual bool ShowsData() const { return true; }

  // Those of `linked` whose entity is live.
  static std::vector<std::string> LiveOnly(const std::vector<std::string>& linked,
                                           const TargetOf& target);

  // The relation kept through the link: a row (target: the document's id)
  // per live linked entity, in the spec's order (by id when unordered).
  const Relation& linked_relation() const { return linked_; }
  size_t projection() const { return projection_; }

 private:
  // The live entities of `target_type` among `ids`, into *live.
  Status LoadLive(StoreTransaction& txn, const std::set<std::string>& ids,
                  std::map<std::string, EntityRecord>* live) const;

  const ThroughSpec& through_;
  const std::string target_type_;
  const size_t projection_;
  const std::optional<uint64_t> limit_;
  const Link& link_;
  const Relation& linked_;
};

// Through a link, each linked entity as `select` shows it (lookup, embed):
// an absent or deleted one left out, or null with `missing_as_null`. A
// change of what `select` shows of a linked entity reaches its documents.
class LinkedSelectionDerivation : public LinkedDerivation {
 public:
  LinkedSelectionDerivation(const ThroughSpec& spec, std::string target_type, PlanBuilder& plan,
                            std::optional<uint64_t> limit, const Selection& select,
                            bool missing_as_null)
      : LinkedDerivation(spec, std::move(target_type), plan, limit),
        select_(select),
        missing_as_null_(missing_as_null) {}

  bool Show(const std::vector<std::string>& linked, const TargetOf& target, JsonValue* out,
            JsonAllocator& allocator) const override;

 protected:
  bool ShownChanged(const EntityChange& change) const override;
  bool missing_as_null() const { return missing_as_null_; }

 private:
  const Selection& select_;
  const bool missing_as_null_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_DERIVATIONS_LINKED_H_
