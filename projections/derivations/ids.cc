// {ids: T, via: F [, limit: N]}: the ids of the entities of T that name this
// entity in F, ascending (the first N). The many-to-many side without a
// join table: author.books. Within a batch, a document that is stored and
// whose list is whole (no limit) takes its stored list and applies the
// referrers the batch moved, so its cost follows the change, not the list;
// the result must be as long as the index's counter for the target says, or
// the list is read from the index after all.
//
// {ids: T, through: L, from: F, to: G [, order_by | link_order_by] [, limit:
// N]}: the ids of the live entities of T this entity is linked to by rows of
// L, ascending, or in the order of their fields (order_by) or of the link
// rows' (link_order_by), the first N: the many-to-many side with a join
// table (derivations/linked.h). By id it is read and spliced like the list
// above, over the relation kept through the link; in an order, the first N
// are read by index in that order.
#include <algorithm>

#include "projections/derivations/children.h"
#include "projections/derivations/linked.h"
#include "projections/derivations/registry.h"
#include "projections/reference_index.h"

namespace denormd {

namespace {

struct IdsSpec : DerivationSpec, ChildrenSpec {
  std::optional<ThroughSpec> through;  // instead of `via`
  std::optional<uint64_t> limit;
  std::string Normalized() const override {
    return JoinWords({"ids", entity, through ? through->Normalized() : "via " + via.text,
                      limit ? "limit " + std::to_string(*limit) : ""});
  }
};

// The ids as a JSON array, the first `limit`.
void RenderIds(std::vector<std::string> ids, const std::optional<uint64_t>& limit, JsonValue* out,
               JsonAllocator& allocator) {
  if (limit && ids.size() > *limit) ids.resize(*limit);
  out->SetArray();
  for (const std::string& id : ids) {
    out->PushBack(JsonValue(id.data(), static_cast<rapidjson::SizeType>(id.size()), allocator),
                  allocator);
  }
}

struct IdsReads : DerivationReads {
  std::map<std::string, std::vector<std::string>> children;  // parent -> child ids, ascending
};

// The stored list of `field` in the document `json` with `moves` applied,
// ascending; false when the stored value is not a sorted list of ids or the
// moves do not fit it (a joined id already there, a left one missing): the
// caller then reads the referrers.
bool SpliceStoredIds(const std::string& json, const std::string& field, const ReferrerMoves* moves,
                     std::vector<std::string>* out) {
  JsonDocument doc;
  if (!ParseJson(json, &doc).ok() || !doc.IsObject()) return false;
  auto member = doc.FindMember(JsonValue(rapidjson::StringRef(field.data(), field.size())));
  if (member == doc.MemberEnd() || !member->value.IsArray()) return false;
  std::vector<std::string> stored;
  stored.reserve(member->value.Size());
  for (const JsonValue& item : member->value.GetArray()) {
    if (!item.IsString()) return false;
    stored.emplace_back(item.GetString(), item.GetStringLength());
    if (stored.size() > 1 && !(stored[stored.size() - 2] < stored.back())) return false;
  }
  if (moves == nullptr) {
    *out = std::move(stored);
    return true;
  }
  size_t left = 0;
  out->clear();
  out->reserve(stored.size() + moves->joined.size());
  for (std::string& id : stored) {
    if (moves->left.count(id)) {
      ++left;
    } else if (moves->joined.count(id)) {
      return false;
    } else {
      out->push_back(std::move(id));
    }
  }
  if (left != moves->left.size()) return false;
  const size_t kept = out->size();
  out->insert(out->end(), moves->joined.begin(), moves->joined.end());
  std::inplace_merge(out->begin(), out->begin() + kept, out->end());
  return true;
}

// An ids list read from one relation: from the index, or within a batch by
// splicing the stored list with the moves (what both kinds of ids share).
class IdsList {
 public:
  IdsList(const Relation& relation, std::optional<uint64_t> limit, PlanBuilder& plan)
      : relation_(relation),
        limit_(limit),
        projection_config_(plan.projection()),
        field_(plan.field()) {}

  Status Read(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
              std::unique_ptr<DerivationReads>* out) const {
    auto reads = std::make_unique<IdsReads>();
    DENORMD_RETURN_IF_ERROR(ReadFromIndex(txn, roots, reads.get()));
    *out = std::move(reads);
    return Status::Ok();
  }

  // What ReadInBatch reads first: the stored documents and the counters.
  void ReadAhead(StoreTransaction& txn, const std::vector<std::string>& ids) const {
    if (limit_) return;
    txn.documents().ReadAhead(projection_config_, ids);
    txn.index().ReadCountsAhead(relation_, ids);
  }

  Status ReadInBatch(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
                     const RelationMoves& moves, std::unique_ptr<DerivationReads>* out) const {
    // A limited list cannot take a move out of its tail: it is read.
    if (limit_) return Read(txn, roots, out);
    std::vector<std::string> ids;
    for (const EntityRecord* root : roots) ids.push_back(root->key.id);
    std::vector<DocumentRow> stored;
    DENORMD_RETURN_IF_ERROR(txn.documents().Load(projection_config_, ids, &stored));
    static const std::map<std::string, ReferrerMoves> kNone;
    auto relation = moves.find(&relation_);
    const auto& moved = relation == moves.end() ? kNone : relation->second;
    auto reads = std::make_unique<IdsReads>();
    for (const DocumentRow& row : stored) {
      auto found = moved.find(row.id);
      std::vector<std::string> spliced;
      if (SpliceStoredIds(row.json, field_, found == moved.end() ? nullptr : &found->second,
                          &spliced)) {
        reads->children[row.id] = std::move(spliced);
      }
    }
    // Each spliced list must be as long as the index's counter says (kept
    // with the index rows in their statement): a stored list that drifted
    // from the index is read again rather than carried on.
    std::vector<std::string> spliced;
    for (const auto& entry : reads->children) spliced.push_back(entry.first);
    std::map<std::string, uint64_t> counts;
    DENORMD_RETURN_IF_ERROR(CountReferrers(txn.index(), relation_, spliced, &counts));
    for (const std::string& id : spliced) {
      if (counts[id] != reads->children[id].size()) reads->children.erase(id);
    }
    std::vector<const EntityRecord*> unstored;  // new documents, and lists that did not fit
    for (const EntityRecord* root : roots) {
      if (!reads->children.count(root->key.id)) unstored.push_back(root);
    }
    DENORMD_RETURN_IF_ERROR(ReadFromIndex(txn, unstored, reads.get()));
    *out = std::move(reads);
    return Status::Ok();
  }

  bool Render(const EntityRecord& root, const DerivationReads* reads, JsonValue* out,
              JsonAllocator& allocator) const {
    const auto& children = static_cast<const IdsReads*>(reads)->children;
    auto it = children.find(root.key.id);
    RenderIds(it == children.end() ? std::vector<std::string>() : it->second, limit_, out,
              allocator);
    return true;
  }

 private:
  // Every referrer of `roots` from the index, into `reads` (ascending).
  Status ReadFromIndex(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
                       IdsReads* reads) const {
    if (roots.empty()) return Status::Ok();
    std::vector<std::string> ids;
    for (const EntityRecord* root : roots) ids.push_back(root->key.id);
    std::vector<Referrer> referrers;
    // Index rows are in (sort, id) order; without an order (the relation
    // carries none for another field) that is id order, so a limited list
    // reads only its first `limit` rows.
    const bool by_id = relation_.order() == nullptr || !relation_.order()->present;
    DENORMD_RETURN_IF_ERROR(
        limit_ && by_id
            ? ReadFirstReferrers(txn.index(), relation_, ids, *limit_, ReferenceIndex::Read::kKeys,
                                 &referrers)
            : ReadReferrers(txn.index(), relation_, ids, ReferenceIndex::Read::kKeys, &referrers));
    std::set<std::string> filled;
    for (const Referrer& referrer : referrers) {
      reads->children[referrer.target].push_back(referrer.entity.key.id);
      filled.insert(referrer.target);
    }
    for (const std::string& target : filled) {
      std::vector<std::string>& children = reads->children[target];
      std::sort(children.begin(), children.end());
    }
    return Status::Ok();
  }

  const Relation& relation_;
  const std::optional<uint64_t> limit_;
  const ProjectionConfig& projection_config_;
  const std::string field_;
};

class IdsDerivation : public Derivation {
 public:
  IdsDerivation(const IdsSpec& spec, PlanBuilder& plan)
      : spec_(spec),
        projection_(plan.projection_index()),
        via_(plan.UseRelation(spec.entity, spec.via, nullptr, Relation::Flavour::kReferences)),
        list_(via_, spec.limit, plan) {}

  std::vector<std::string> DependsOn() const override { return {spec_.entity}; }

  void CollectAffected(const EntityChange& change, AffectedUnits* out) const override {
    AddParentsOfChild(via_, projection_, change, /*payload=*/false, out, /*record_moves=*/true);
  }

  Status Read(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
              std::unique_ptr<DerivationReads>* out) const override {
    return list_.Read(txn, roots, out);
  }

  void ReadAhead(StoreTransaction& txn, const std::vector<std::string>& ids) const override {
    list_.ReadAhead(txn, ids);
  }

  Status ReadInBatch(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
                     const RelationMoves& moves,
                     std::unique_ptr<DerivationReads>* out) const override {
    return list_.ReadInBatch(txn, roots, moves, out);
  }

  bool Render(const EntityRecord& root, const DerivationReads* reads, JsonValue* out,
              JsonAllocator& allocator) const override {
    return list_.Render(root, reads, out, allocator);
  }

  bool Define(const EntityRecord& root, SourceView& source, JsonValue* out,
              JsonAllocator& allocator) const override {
    RenderIds(source.ReferrerIds(spec_.entity, spec_.via, SourceView::Naming::kReferences,
                                 root.key.id),
              spec_.limit, out, allocator);
    return true;
  }

 private:
  const IdsSpec& spec_;
  const size_t projection_;
  const Relation& via_;
  const IdsList list_;
};

// Through a link: the same list over the relation kept through the link,
// whose moves the batch records when it reconciles its rows.
// In an order (`order_by`, `link_order_by`), the first N read by index in
// that order like a lookup's (LinkedDerivation::Read).
class LinkedIdsDerivation : public LinkedDerivation {
 public:
  LinkedIdsDerivation(const IdsSpec& spec, PlanBuilder& plan)
      : LinkedDerivation(*spec.through, spec.entity, plan, spec.limit),
        limit_(spec.limit),
        ordered_(spec.through->ordered()),
        list_(linked_relation(), spec.limit, plan) {}

  Status Read(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
              std::unique_ptr<DerivationReads>* out) const override {
    if (ordered_) return LinkedDerivation::Read(txn, roots, out);
    return list_.Read(txn, roots, out);
  }

  void ReadAhead(StoreTransaction& txn, const std::vector<std::string>& ids) const override {
    if (!ordered_) list_.ReadAhead(txn, ids);
  }

  Status ReadInBatch(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
                     const RelationMoves& moves,
                     std::unique_ptr<DerivationReads>* out) const override {
    if (ordered_) return LinkedDerivation::Read(txn, roots, out);
    return list_.ReadInBatch(txn, roots, moves, out);
  }

  bool Render(const EntityRecord& root, const DerivationReads* reads, JsonValue* out,
              JsonAllocator& allocator) const override {
    if (ordered_) return LinkedDerivation::Render(root, reads, out, allocator);
    return list_.Render(root, reads, out, allocator);
  }

  bool ShowsData() const override { return false; }

  // From the live linked ids, in order (Read, and verify).
  bool Show(const std::vector<std::string>& linked, const TargetOf& target, JsonValue* out,
            JsonAllocator& allocator) const override {
    RenderIds(LiveOnly(linked, target), limit_, out, allocator);
    return true;
  }

 private:
  const std::optional<uint64_t> limit_;
  const bool ordered_;
  const IdsList list_;
};

class Kind : public DerivationKind {
 public:
  const std::string& name() const override { return name_; }
  const std::vector<std::string>& keys() const override { return keys_; }

  std::shared_ptr<const DerivationSpec> Parse(ExpressionReader& reader) const override {
    auto spec = std::make_shared<IdsSpec>();
    bool ok = reader.ReadEntityType("ids", &spec->entity);
    ok = ReadThrough(reader, "via", &spec->through, /*ordered=*/true) && ok;
    if (!UsesThrough(reader)) {
      ok = reader.ReadPath("via", &spec->via) && ok;
      ok = RefuseOrderWithout(reader, "ids", "via lists ids in ascending order") && ok;
    }
    ok = ReadLimit(reader, &spec->limit) && ok;
    return ok ? spec : nullptr;
  }

  std::unique_ptr<Derivation> Bind(const DerivationSpec& spec, PlanBuilder& plan) const override {
    const auto& ids = static_cast<const IdsSpec&>(spec);
    if (ids.through) return std::make_unique<LinkedIdsDerivation>(ids, plan);
    return std::make_unique<IdsDerivation>(ids, plan);
  }

 private:
  const std::string name_ = "ids";
  const std::vector<std::string> keys_ = {"ids",   "via",      "through",       "from",
                                          "to",    "order_by", "link_order_by", "limit"};
};

}  // namespace

const DerivationKind& IdsKind() {
  static const Kind kind;
  return kind;
}

}  // namespace denormd
