// {ids: T, via: F [, limit: N]}: the ids of the entities of T that name this
// entity in F, ascending (the first N). The many-to-many side without a
// join table: author.books.
//
// {ids: T, through: L, from: F, to: G [, limit: N]}: the ids of the live
// entities of T this entity is linked to by rows of L, ascending (the first
// N): the many-to-many side with a join table (derivations/linked.h).
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
  std::map<std::string, std::vector<std::string>> children;  // parent -> child ids
};

class IdsDerivation : public Derivation {
 public:
  IdsDerivation(const IdsSpec& spec, PlanBuilder& plan)
      : spec_(spec),
        projection_(plan.projection_index()),
        via_(plan.UseRelation(spec.entity, spec.via, nullptr, Relation::Flavour::kReferences)) {}

  std::vector<std::string> DependsOn() const override { return {spec_.entity}; }

  void CollectAffected(const EntityChange& change, AffectedUnits* out) const override {
    AddParentsOfChild(via_, projection_, change, /*payload=*/false, out);
  }

  Status Read(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
              std::unique_ptr<DerivationReads>* out) const override {
    std::vector<std::string> ids;
    for (const EntityRecord* root : roots) ids.push_back(root->key.id);
    std::vector<Referrer> referrers;
    DENORMD_RETURN_IF_ERROR(
        ReadReferrers(txn.index(), via_, ids, ReferenceIndex::Read::kKeys, &referrers));
    auto reads = std::make_unique<IdsReads>();
    for (const Referrer& referrer : referrers) {
      reads->children[referrer.target].push_back(referrer.entity.key.id);
    }
    *out = std::move(reads);
    return Status::Ok();
  }

  bool Render(const EntityRecord& root, const DerivationReads* reads, JsonValue* out,
              JsonAllocator& allocator) const override {
    const auto& children = static_cast<const IdsReads*>(reads)->children;
    std::vector<std::string> ids;
    auto it = children.find(root.key.id);
    if (it != children.end()) ids = it->second;
    std::sort(ids.begin(), ids.end());
    RenderIds(std::move(ids), spec_.limit, out, allocator);
    return true;
  }

 private:
  const IdsSpec& spec_;
  const size_t projection_;
  const Relation& via_;
};

class LinkedIdsDerivation : public LinkedDerivation {
 public:
  LinkedIdsDerivation(const IdsSpec& spec, PlanBuilder& plan)
      : LinkedDerivation(*spec.through, spec.entity, plan), limit_(spec.limit) {}

  bool Render(const EntityRecord& root, const DerivationReads* reads, JsonValue* out,
              JsonAllocator& allocator) const override {
    RenderIds(Linked(root, reads, /*live_only=*/true), limit_, out, allocator);
    return true;
  }

 private:
  const std::optional<uint64_t> limit_;
};

class Kind : public DerivationKind {
 public:
  const std::string& name() const override { return name_; }
  const std::vector<std::string>& keys() const override { return keys_; }

  std::shared_ptr<const DerivationSpec> Parse(ExpressionReader& reader) const override {
    auto spec = std::make_shared<IdsSpec>();
    bool ok = reader.ReadEntityType("ids", &spec->entity);
    ok = ReadThrough(reader, "via", &spec->through) && ok;
    if (!UsesThrough(reader)) ok = reader.ReadPath("via", &spec->via) && ok;
    uint64_t limit = 0;
    if (reader.Has("limit")) {
      if (reader.ReadUint("limit", 1, &limit)) {
        spec->limit = limit;
      } else {
        ok = false;
      }
    }
    return ok ? spec : nullptr;
  }

  std::unique_ptr<Derivation> Bind(const DerivationSpec& spec, PlanBuilder& plan) const override {
    const auto& ids = static_cast<const IdsSpec&>(spec);
    if (ids.through) return std::make_unique<LinkedIdsDerivation>(ids, plan);
    return std::make_unique<IdsDerivation>(ids, plan);
  }

 private:
  const std::string name_ = "ids";
  const std::vector<std::string> keys_ = {"ids", "via", "through", "from", "to", "limit"};
};

}  // namespace

const DerivationKind& IdsKind() {
  static const Kind kind;
  return kind;
}

}  // namespace denormd
