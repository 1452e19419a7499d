// {embed: T, via: F [, select] [, order_by] [, limit: N]}: the entities of T
// that name this entity in F, each as `select` shows it, in `order_by`
// order (ties and the default by id), the first N. With a limit only the
// first N children are read, by index: a post with a million comments
// costs three index reads for its three most recent.
//
// {embed: T, through: L, from: F, to: G [, select] [, order_by |
// link_order_by] [, limit: N]}: the live entities of T this entity is
// linked to by rows of L (a join table; derivations/linked.h), each as
// `select` shows it, by id or in the order of their fields (order_by) or of
// the link rows' (link_order_by), the first N, read by index in that order.
#include "projections/derivations/children.h"
#include "projections/derivations/linked.h"
#include "projections/derivations/registry.h"
#include "projections/reference_index.h"
#include "projections/selection.h"

namespace denormd {

namespace {

struct EmbedSpec : DerivationSpec, ChildrenSpec {
  std::optional<ThroughSpec> through;  // instead of `via` (its orders there)
  Selection select;
  OrderBy order_by;
  std::optional<uint64_t> limit;
  std::string Normalized() const override {
    return JoinWords({"embed", entity, through ? through->Normalized() : "via " + via.text,
                      NormalizedOrderBy(order_by), limit ? "limit " + std::to_string(*limit) : "",
                      NormalizedSelection(select)});
  }
};

struct EmbedReads : DerivationReads {
  std::vector<Referrer> referrers;
  std::map<std::string, std::vector<const Referrer*>> children;  // parent -> children, in order
};

class EmbedDerivation : public Derivation {
 public:
  EmbedDerivation(const EmbedSpec& spec, PlanBuilder& plan)
      : spec_(spec),
        projection_(plan.projection_index()),
        via_(plan.UseRelation(spec.entity, spec.via, &spec.order_by,
                              Relation::Flavour::kReferences)) {}

  std::vector<std::string> DependsOn() const override { return {spec_.entity}; }

  void CollectAffected(const EntityChange& change, AffectedUnits* out) const override {
    // The parents also change when what they show of the child changes: its
    // selection, or its place in their order.
    const EntityState& before = *change.before;
    const EntityState& after = *change.after;
    bool payload = SelectionChanged(spec_.select, before, after) ||
                   (IsLive(before) && IsLive(after) &&
                    via_.SortKey(before->key.id, *before->data) !=
                        via_.SortKey(after->key.id, *after->data));
    AddParentsOfChild(via_, projection_, change, payload, out);
  }

  // The question Read asks when every root is live.
  void ReadAhead(StoreTransaction& txn, const std::vector<std::string>& ids) const override {
    if (spec_.limit && *spec_.limit == 0) return;
    ReadReferrersAhead(txn.index(), via_, ids, spec_.limit ? *spec_.limit : 0,
                       ReferenceIndex::Read::kKeysAndData);
  }

  Status Read(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
              std::unique_ptr<DerivationReads>* out) const override {
    std::vector<std::string> ids;
    for (const EntityRecord* root : roots) ids.push_back(root->key.id);
    auto reads = std::make_unique<EmbedReads>();
    if (spec_.limit) {
      DENORMD_RETURN_IF_ERROR(
          ReadFirstReferrers(txn.index(), via_, ids, *spec_.limit,
                             ReferenceIndex::Read::kKeysAndData, &reads->referrers));
    } else {
      DENORMD_RETURN_IF_ERROR(ReadReferrers(txn.index(), via_, ids,
                                            ReferenceIndex::Read::kKeysAndData,
                                            &reads->referrers));
    }
    reads->children = GroupByTarget(reads->referrers);
    *out = std::move(reads);
    return Status::Ok();
  }

  bool Render(const EntityRecord& root, const DerivationReads* reads, JsonValue* out,
              JsonAllocator& allocator) const override {
    const auto& children = static_cast<const EmbedReads*>(reads)->children;
    out->SetArray();
    auto it = children.find(root.key.id);
    if (it == children.end()) return true;
    size_t n = it->second.size();
    if (spec_.limit && n > *spec_.limit) n = *spec_.limit;
    for (size_t i = 0; i < n; ++i) {
      const EntityRecord& child = it->second[i]->entity;
      JsonValue item;
      ApplySelection(spec_.select, child.key.id, *child.data, &item, allocator);
      out->PushBack(item, allocator);
    }
    return true;
  }

  bool Define(const EntityRecord& root, SourceView& source, JsonValue* out,
              JsonAllocator& allocator) const override {
    std::vector<const EntityRecord*> children = source.Entities(
        spec_.entity,
        source.ReferrerIds(spec_.entity, spec_.via, SourceView::Naming::kReferences, root.key.id));
    SortAsConfigured(spec_.order_by, &children);
    if (spec_.limit && children.size() > *spec_.limit) children.resize(*spec_.limit);
    out->SetArray();
    for (const EntityRecord* child : children) {
      JsonValue item;
      ApplySelection(spec_.select, child->key.id, *child->data, &item, allocator);
      out->PushBack(item, allocator);
    }
    return true;
  }

 private:
  const EmbedSpec& spec_;
  const size_t projection_;
  const Relation& via_;
};

class Kind : public DerivationKind {
 public:
  const std::string& name() const override { return name_; }
  const std::vector<std::string>& keys() const override { return keys_; }

  std::shared_ptr<const DerivationSpec> Parse(ExpressionReader& reader) const override {
    auto spec = std::make_shared<EmbedSpec>();
    bool ok = reader.ReadEntityType("embed", &spec->entity);
    ok = ReadThrough(reader, "via", &spec->through, /*ordered=*/true) && ok;
    if (!UsesThrough(reader)) {
      ok = reader.ReadPath("via", &spec->via) && ok;
      if (reader.Has("order_by")) ok = reader.ReadOrderBy("order_by", &spec->order_by) && ok;
      if (reader.Has("link_order_by")) {
        reader.Error("link_order_by", "\"link_order_by\" is for an embed through a link "
                                      "(through, from, to); via orders by the children's "
                                      "fields with order_by");
        ok = false;
      }
    }
    if (reader.Has("select")) ok = reader.ReadSelection("select", &spec->select) && ok;
    ok = ReadLimit(reader, &spec->limit) && ok;
    return ok ? spec : nullptr;
  }

  std::unique_ptr<Derivation> Bind(const DerivationSpec& spec, PlanBuilder& plan) const override {
    const auto& embed = static_cast<const EmbedSpec&>(spec);
    // Through a link: the live linked entities, each as `select` shows it,
    // in the spec's order, the first N (derivations/linked.h).
    if (embed.through) {
      return std::make_unique<LinkedSelectionDerivation>(*embed.through, embed.entity, plan,
                                                         embed.limit, embed.select,
                                                         /*missing_as_null=*/false);
    }
    return std::make_unique<EmbedDerivation>(embed, plan);
  }

 private:
  const std::string name_ = "embed";
  const std::vector<std::string> keys_ = {"embed", "via",      "through",       "from", "to",
                                          "select", "order_by", "link_order_by", "limit"};
};

}  // namespace

const DerivationKind& EmbedKind() {
  static const Kind kind;
  return kind;
}

}  // namespace denormd
