// {count: T, via: F}: how many entities of T name this entity in F (their
// F is its id, or an array holding it). Read from the counts the reference
// index keeps per target: one row per document, whatever the count.
//
// {count: T, through: L, from: F, to: G}: how many live entities of T this
// entity is linked to by rows of L (derivations/linked.h): the counter of
// the relation kept through the link, which has one row per live linked
// entity however many link rows pair it.
#include <map>

#include "projections/derivations/children.h"
#include "projections/derivations/linked.h"
#include "projections/derivations/registry.h"
#include "projections/reference_index.h"

namespace denormd {

namespace {

struct CountSpec : DerivationSpec, ChildrenSpec {
  std::optional<ThroughSpec> through;  // instead of `via`
  std::string Normalized() const override {
    if (through) return JoinWords({"count", entity, through->Normalized()});
    return JoinWords({"count", entity, "via", via.text});
  }
};

struct CountReads : DerivationReads {
  std::map<std::string, uint64_t> counts;
};

// The count CountReads holds for `root` (0 when none).
bool RenderCount(const EntityRecord& root, const DerivationReads* reads, JsonValue* out) {
  const auto& counts = static_cast<const CountReads*>(reads)->counts;
  auto it = counts.find(root.key.id);
  out->SetUint64(it == counts.end() ? 0 : it->second);
  return true;
}

class CountDerivation : public Derivation {
 public:
  CountDerivation(const CountSpec& spec, PlanBuilder& plan)
      : spec_(spec),
        projection_(plan.projection_index()),
        via_(plan.UseRelation(spec.entity, spec.via, nullptr, Relation::Flavour::kReferences)) {}

  std::vector<std::string> DependsOn() const override { return {spec_.entity}; }

  void CollectAffected(const EntityChange& change, AffectedUnits* out) const override {
    AddParentsOfChild(via_, projection_, change, /*payload=*/false, out);
  }

  void ReadAhead(StoreTransaction& txn, const std::vector<std::string>& ids) const override {
    txn.index().ReadCountsAhead(via_, ids);
  }

  Status Read(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
              std::unique_ptr<DerivationReads>* out) const override {
    auto reads = std::make_unique<CountReads>();
    std::vector<std::string> ids;
    for (const EntityRecord* root : roots) ids.push_back(root->key.id);
    DENORMD_RETURN_IF_ERROR(CountReferrers(txn.index(), via_, ids, &reads->counts));
    *out = std::move(reads);
    return Status::Ok();
  }

  bool Render(const EntityRecord& root, const DerivationReads* reads, JsonValue* out,
              JsonAllocator& /*allocator*/) const override {
    return RenderCount(root, reads, out);
  }

  bool Define(const EntityRecord& root, SourceView& source, JsonValue* out,
              JsonAllocator& /*allocator*/) const override {
    out->SetUint64(source
                       .ReferrerIds(spec_.entity, spec_.via, SourceView::Naming::kReferences,
                                    root.key.id)
                       .size());
    return true;
  }

 private:
  const CountSpec& spec_;
  const size_t projection_;
  const Relation& via_;
};

// Through a link: the counter of the linked relation, one row per document.
class LinkedCountDerivation : public LinkedDerivation {
 public:
  LinkedCountDerivation(const CountSpec& spec, PlanBuilder& plan)
      : LinkedDerivation(*spec.through, spec.entity, plan) {}  // unordered: no order read

  void ReadAhead(StoreTransaction& txn, const std::vector<std::string>& ids) const override {
    txn.index().ReadCountsAhead(linked_relation(), ids);
  }

  Status Read(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
              std::unique_ptr<DerivationReads>* out) const override {
    auto reads = std::make_unique<CountReads>();
    std::vector<std::string> ids;
    for (const EntityRecord* root : roots) ids.push_back(root->key.id);
    DENORMD_RETURN_IF_ERROR(CountReferrers(txn.index(), linked_relation(), ids, &reads->counts));
    *out = std::move(reads);
    return Status::Ok();
  }

  bool Render(const EntityRecord& root, const DerivationReads* reads, JsonValue* out,
              JsonAllocator& /*allocator*/) const override {
    return RenderCount(root, reads, out);
  }

  // For verify.
  bool Show(const std::vector<std::string>& linked, const TargetOf& target, JsonValue* out,
            JsonAllocator& /*allocator*/) const override {
    out->SetUint64(LiveOnly(linked, target).size());
    return true;
  }
};

class Kind : public DerivationKind {
 public:
  const std::string& name() const override { return name_; }
  const std::vector<std::string>& keys() const override { return keys_; }

  std::shared_ptr<const DerivationSpec> Parse(ExpressionReader& reader) const override {
    auto spec = std::make_shared<CountSpec>();
    bool ok = reader.ReadEntityType("count", &spec->entity);
    ok = ReadThrough(reader, "via", &spec->through) && ok;
    if (!UsesThrough(reader)) ok = reader.ReadPath("via", &spec->via) && ok;
    return ok ? spec : nullptr;
  }

  std::unique_ptr<Derivation> Bind(const DerivationSpec& spec, PlanBuilder& plan) const override {
    const auto& count = static_cast<const CountSpec&>(spec);
    if (count.through) return std::make_unique<LinkedCountDerivation>(count, plan);
    return std::make_unique<CountDerivation>(count, plan);
  }

 private:
  const std::string name_ = "count";
  const std::vector<std::string> keys_ = {"count", "via", "through", "from", "to"};
};

}  // namespace

const DerivationKind& CountKind() {
  static const Kind kind;
  return kind;
}

}  // namespace denormd
