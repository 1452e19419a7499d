// {lookup: T, by: F [, select] [, missing: skip|null]}: the entities of T
// whose ids this entity's F holds (a string, or an array kept in its order),
// each as `select` shows it. A missing target is left out (skip) or null;
// on a string reference it is null.
//
// The fan-out: when a target changes what `select` shows of it, the
// documents that look it up are found through the reference index (the
// `by` relation of the root type), never by a scan. When a root names new
// targets, they are locked before it is recomputed (the protocol at
// BatchApplier::Apply).
//
// {lookup: T, through: L, from: F, to: G [, order_by | link_order_by]
// [, limit] [, select] [, missing]}: the entities of T this entity is linked
// to by rows of L (a join table; derivations/linked.h), in ascending id
// order or in the order of their fields (order_by) or of the link rows'
// (link_order_by), the first N, each as `select` shows it;
// a link to a missing target is left out (skip) or null. Read from the
// relation kept through the link (live targets, one read), or with `missing:
// null` from the link rows. A change of what a target shows reaches the
// documents through its link rows.
#include <functional>
#include <set>

#include "projections/derivations/linked.h"
#include "projections/derivations/registry.h"
#include "projections/selection.h"

namespace denormd {

namespace {

struct LookupSpec : DerivationSpec {
  std::string entity;
  Path by;
  std::optional<ThroughSpec> through;  // instead of `by`
  std::optional<uint64_t> limit;       // through a link only
  Selection select;
  bool missing_as_null = false;
  std::string Normalized() const override {
    return JoinWords({"lookup", entity, through ? through->Normalized() : "by " + by.text,
                      limit ? "limit " + std::to_string(*limit) : "",
                      NormalizedSelection(select), missing_as_null ? "missing null" : ""});
  }
};

struct LookupReads : DerivationReads {
  std::map<std::string, EntityRecord> targets;  // id -> live target
};

class LookupDerivation : public Derivation {
 public:
  LookupDerivation(const LookupSpec& spec, PlanBuilder& plan)
      : spec_(spec),
        root_type_(plan.projection().from),
        projection_(plan.projection_index()),
        by_(plan.UseRelation(root_type_, spec.by, nullptr, Relation::Flavour::kReferences)) {}

  std::vector<std::string> DependsOn() const override {
    if (spec_.entity == root_type_) return {spec_.entity};
    return {spec_.entity, root_type_};
  }

  void CollectAffected(const EntityChange& change, AffectedUnits* out) const override {
    if (change.key.type == spec_.entity &&
        SelectionChanged(spec_.select, *change.before, *change.after)) {
      out->AddReferrersOf(by_, projection_, change.key.id);
    }
    if (change.key.type == root_type_) {
      for (const std::string& target : by_.TargetsOf(*change.after)) {
        out->locks.push_back(EntityLockKey(spec_.entity, target));
      }
    }
  }

  Status Read(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
              std::unique_ptr<DerivationReads>* out) const override {
    std::set<std::string> ids;
    for (const EntityRecord* root : roots) {
      for (std::string& id : by_.Targets(root->key.id, *root->data)) ids.insert(std::move(id));
    }
    std::vector<EntityKey> keys;
    for (const std::string& id : ids) keys.push_back({spec_.entity, id});
    std::vector<EntityRecord> records;
    DENORMD_RETURN_IF_ERROR(txn.source().LoadEntities(keys, &records));
    auto reads = std::make_unique<LookupReads>();
    for (EntityRecord& record : records) {
      if (record.live()) reads->targets[record.key.id] = std::move(record);
    }
    *out = std::move(reads);
    return Status::Ok();
  }

  bool Render(const EntityRecord& root, const DerivationReads* reads, JsonValue* out,
              JsonAllocator& allocator) const override {
    const auto& targets = static_cast<const LookupReads*>(reads)->targets;
    return Show(root, [&targets](const std::string& id) -> const EntityRecord* {
      auto it = targets.find(id);
      return it == targets.end() ? nullptr : &it->second;
    }, out, allocator);
  }

  bool Define(const EntityRecord& root, SourceView& source, JsonValue* out,
              JsonAllocator& allocator) const override {
    return Show(root, [&](const std::string& id) { return source.Entity(spec_.entity, id); }, out,
                allocator);
  }

 private:
  using TargetOf = std::function<const EntityRecord*(const std::string& id)>;

  // The field for `root`, `target` finding each live target (null: missing).
  bool Show(const EntityRecord& root, const TargetOf& target, JsonValue* out,
            JsonAllocator& allocator) const {
    JsonValue scratch;
    const JsonValue* ref = EvalPath(spec_.by, root.key.id, *root.data, &scratch, allocator);
    if (ref == nullptr) return false;
    if (!ref->IsArray()) {
      if (!LookupOne(target, *ref, out, allocator)) out->SetNull();
      return true;
    }
    out->SetArray();
    for (const JsonValue& element : ref->GetArray()) {
      JsonValue item;
      if (LookupOne(target, element, &item, allocator)) {
        out->PushBack(item, allocator);
      } else if (spec_.missing_as_null) {
        out->PushBack(JsonValue(), allocator);
      }
    }
    return true;
  }

  bool LookupOne(const TargetOf& target, const JsonValue& ref, JsonValue* out,
                 JsonAllocator& allocator) const {
    if (!ref.IsString()) return false;
    const EntityRecord* found = target(std::string(ref.GetString(), ref.GetStringLength()));
    if (found == nullptr) return false;
    ApplySelection(spec_.select, found->key.id, *found->data, out, allocator);
    return true;
  }

  const LookupSpec& spec_;
  const std::string root_type_;
  const size_t projection_;
  const Relation& by_;
};

class LinkedLookupDerivation : public LinkedSelectionDerivation {
 public:
  LinkedLookupDerivation(const LookupSpec& spec, PlanBuilder& plan)
      : LinkedSelectionDerivation(*spec.through, spec.entity, plan, spec.limit, spec.select,
                                  spec.missing_as_null) {}

  // The relation kept through the link holds live targets only; a missing
  // one shown as null is found in the link rows.
  Status Read(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
              std::unique_ptr<DerivationReads>* out) const override {
    if (missing_as_null()) return ReadLinkRows(txn, roots, out);
    return LinkedDerivation::Read(txn, roots, out);
  }
};

class Kind : public DerivationKind {
 public:
  const std::string& name() const override { return name_; }
  const std::vector<std::string>& keys() const override { return keys_; }

  std::shared_ptr<const DerivationSpec> Parse(ExpressionReader& reader) const override {
    auto spec = std::make_shared<LookupSpec>();
    bool ok = reader.ReadEntityType("lookup", &spec->entity);
    ok = ReadThrough(reader, "by", &spec->through, /*ordered=*/true) && ok;
    if (!UsesThrough(reader)) {
      ok = reader.ReadPath("by", &spec->by) && ok;
      ok = RefuseOrderWithout(reader, "a lookup",
                              "by shows its targets in the order the field names them",
                              /*limit_ok=*/false) &&
           ok;
    } else {
      ok = ReadLimit(reader, &spec->limit) && ok;
    }
    if (reader.Has("select")) ok = reader.ReadSelection("select", &spec->select) && ok;
    if (reader.Has("missing")) {
      std::string missing;
      if (reader.ReadChoice("missing", {"skip", "null"}, &missing)) {
        spec->missing_as_null = missing == "null";
      } else {
        ok = false;
      }
    }
    if (ok && spec->missing_as_null && spec->through && (spec->through->ordered() || spec->limit)) {
      reader.Error("missing", "\"missing: null\" through a link lists the links to missing "
                              "entities by id; it cannot be combined with order_by, "
                              "link_order_by or limit");
      ok = false;
    }
    return ok ? spec : nullptr;
  }

  std::unique_ptr<Derivation> Bind(const DerivationSpec& spec, PlanBuilder& plan) const override {
    const auto& lookup = static_cast<const LookupSpec&>(spec);
    if (lookup.through) return std::make_unique<LinkedLookupDerivation>(lookup, plan);
    return std::make_unique<LookupDerivation>(lookup, plan);
  }

 private:
  const std::string name_ = "lookup";
  const std::vector<std::string> keys_ = {"lookup",   "by",       "through",       "from",
                                          "to",       "order_by", "link_order_by", "limit",
                                          "select",   "missing"};
};

}  // namespace

const DerivationKind& LookupKind() {
  static const Kind kind;
  return kind;
}

}  // namespace denormd
