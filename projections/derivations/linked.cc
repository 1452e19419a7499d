#include "projections/derivations/linked.h"

#include <algorithm>
#include <set>

#include "projections/derivations/registry.h"
#include "projections/reference_index.h"
#include "projections/selection.h"

namespace denormd {

namespace {

std::string Quote(const std::string& text) { return "\"" + text + "\""; }

}  // namespace

std::string ThroughSpec::Normalized() const {
  return JoinWords({"through", link, "from", from.text, "to", to.text,
                    NormalizedOrderBy(order_by),
                    link_order_by.present ? "link " + NormalizedOrderBy(link_order_by) : ""});
}

bool UsesThrough(const ExpressionReader& reader) {
  return reader.Has("through") || reader.Has("from") || reader.Has("to");
}

bool ReadThrough(ExpressionReader& reader, const std::string& alternative,
                 std::optional<ThroughSpec>* out, bool ordered) {
  if (!UsesThrough(reader)) return true;
  bool ok = true;
  if (reader.Has(alternative)) {
    reader.Error(alternative, Quote(alternative) +
                                  " and \"through\" exclude each other: give " +
                                  Quote(alternative) + " for a reference field, or \"through\", "
                                  "\"from\" and \"to\" for a link entity");
    ok = false;
  }
  ThroughSpec spec;
  ok = reader.ReadEntityType("through", &spec.link) && ok;
  ok = reader.ReadPath("from", &spec.from) && ok;
  ok = reader.ReadPath("to", &spec.to) && ok;
  if (ordered && reader.Has("order_by")) ok = reader.ReadOrderBy("order_by", &spec.order_by) && ok;
  if (ordered && reader.Has("link_order_by")) {
    ok = reader.ReadOrderBy("link_order_by", &spec.link_order_by) && ok;
  }
  if (ok && spec.order_by.present && spec.link_order_by.present) {
    reader.Error("link_order_by", "\"order_by\" (a field of the linked entity) and "
                                  "\"link_order_by\" (a field of the link row) exclude each other");
    ok = false;
  }
  if (ok && spec.from.text == spec.to.text) {
    reader.Error("to", "\"from\" and \"to\" must be two different fields of the link entity " +
                           Quote(spec.link));
    ok = false;
  }
  if (ok) *out = std::move(spec);
  return ok;
}

bool RefuseOrderWithout(ExpressionReader& reader, const std::string& kind, const std::string& why,
                        bool limit_ok) {
  bool ok = true;
  std::vector<std::string> keys = {"order_by", "link_order_by"};
  if (!limit_ok) keys.push_back("limit");
  for (const std::string& key : keys) {
    if (!reader.Has(key)) continue;
    reader.Error(key, Quote(key) + " applies to " + kind + " through a link (through, from, " +
                          "to) only; " + why);
    ok = false;
  }
  return ok;
}

LinkedDerivation::LinkedDerivation(const ThroughSpec& spec, std::string target_type,
                                   PlanBuilder& plan, std::optional<uint64_t> limit)
    : through_(spec),
      target_type_(std::move(target_type)),
      projection_(plan.projection_index()),
      limit_(limit),
      link_(plan.UseLink(spec.link, spec.from, spec.to)),
      linked_(plan.UseLinkedRelation(link_, target_type_, &spec.order_by, &spec.link_order_by)) {}

std::vector<std::string> LinkedDerivation::DependsOn() const {
  if (link_.link_type() == target_type_) return {target_type_};
  return {link_.link_type(), target_type_};
}

void LinkedDerivation::CollectAffected(const EntityChange& change, AffectedUnits* out) const {
  if (change.key.type == link_.link_type()) {
    const Relation* ordered_pairs = linked_.ordered_pairs();
    if (ordered_pairs != nullptr && IsLive(*change.before) && IsLive(*change.after) &&
        ordered_pairs->SortKey(change.key.id, *(*change.before)->data) !=
            ordered_pairs->SortKey(change.key.id, *(*change.after)->data)) {
      // The row moved in the link order: every document it names.
      for (const EntityState* state : {change.before, change.after}) {
        for (const std::string& from : link_.from().TargetsOf(*state)) {
          out->AddUnit(projection_, from);
        }
      }
    }
    for (const std::string& from : link_.ChangedFrom(*change.before, *change.after)) {
      out->AddUnit(projection_, from);
    }
    for (const EntityState* state : {change.before, change.after}) {
      for (const std::string& to : link_.to().TargetsOf(*state)) {
        out->locks.push_back(EntityLockKey(target_type_, to));
      }
    }
  }
  if (change.key.type == target_type_ && ShownChanged(change)) {
    out->AddLinkedTo(link_, projection_, change.key.id);
  }
}

bool LinkedDerivation::ShownChanged(const EntityChange& change) const {
  if (IsLive(*change.before) != IsLive(*change.after)) return true;
  return linked_.order() != nullptr && linked_.ordered_pairs() == nullptr &&
         IsLive(*change.before) &&
         linked_.SortKey(change.key.id, *(*change.before)->data) !=
             linked_.SortKey(change.key.id, *(*change.after)->data);
}

Status LinkedDerivation::Read(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
                              std::unique_ptr<DerivationReads>* out) const {
  std::vector<std::string> ids;
  for (const EntityRecord* root : roots) ids.push_back(root->key.id);
  // The keys only: an entity linked to many documents (an author of 20,000
  // books) would come once per document with its data. Those whose data
  // the field shows are loaded once each below.
  std::vector<Referrer> referrers;
  DENORMD_RETURN_IF_ERROR(
      limit_ ? ReadFirstReferrers(txn.index(), linked_, ids, *limit_,
                                  ReferenceIndex::Read::kKeys, &referrers)
             : ReadReferrers(txn.index(), linked_, ids, ReferenceIndex::Read::kKeys,
                             &referrers));
  auto reads = std::make_unique<LinkedReads>();
  std::set<std::string> shown;
  for (const auto& entry : GroupByTarget(referrers)) {  // each list in (sort, id) order
    for (const Referrer* referrer : entry.second) {
      reads->linked[entry.first].push_back(referrer->entity.key.id);
      shown.insert(referrer->entity.key.id);
    }
  }
  if (!ShowsData()) {
    // A row of the relation is a live entity: its key is all Show needs.
    for (const std::string& id : shown) reads->live[id].key = {target_type_, id};
  } else {
    DENORMD_RETURN_IF_ERROR(LoadLive(txn, shown, &reads->live));
  }
  *out = std::move(reads);
  return Status::Ok();
}

Status LinkedDerivation::LoadLive(StoreTransaction& txn, const std::set<std::string>& ids,
                                  std::map<std::string, EntityRecord>* live) const {
  if (ids.empty()) return Status::Ok();
  std::vector<EntityKey> keys;
  for (const std::string& id : ids) keys.push_back({target_type_, id});
  std::vector<EntityRecord> records;
  DENORMD_RETURN_IF_ERROR(txn.source().LoadEntities(keys, &records));
  for (EntityRecord& record : records) {
    if (record.live()) (*live)[record.key.id] = std::move(record);
  }
  return Status::Ok();
}

Status LinkedDerivation::ReadLinkRows(StoreTransaction& txn,
                                      const std::vector<const EntityRecord*>& roots,
                                      std::unique_ptr<DerivationReads>* out) const {
  std::vector<std::string> ids;
  for (const EntityRecord* root : roots) ids.push_back(root->key.id);
  std::vector<LinkedPair> pairs;
  DENORMD_RETURN_IF_ERROR(ReadLinksFrom(txn.index(), link_, ids, &pairs));
  auto reads = std::make_unique<LinkedReads>();
  std::set<std::string> targets;
  for (LinkedPair& pair : pairs) {  // sorted: each list comes out ascending
    targets.insert(pair.to);
    reads->linked[pair.from].push_back(std::move(pair.to));
  }
  DENORMD_RETURN_IF_ERROR(LoadLive(txn, targets, &reads->live));
  *out = std::move(reads);
  return Status::Ok();
}

bool LinkedDerivation::Render(const EntityRecord& root, const DerivationReads* reads,
                              JsonValue* out, JsonAllocator& allocator) const {
  const auto* linked = static_cast<const LinkedReads*>(reads);
  static const std::vector<std::string> kNone;
  auto it = linked->linked.find(root.key.id);
  return Show(it == linked->linked.end() ? kNone : it->second,
              [linked](const std::string& id) -> const EntityRecord* {
                auto found = linked->live.find(id);
                return found == linked->live.end() ? nullptr : &found->second;
              },
              out, allocator);
}

bool LinkedDerivation::Define(const EntityRecord& root, SourceView& source, JsonValue* out,
                              JsonAllocator& allocator) const {
  const auto target = [&](const std::string& id) { return source.Entity(target_type_, id); };
  std::vector<std::string> linked =
      source.Paired(through_.link, through_.from, root.key.id, through_.to);
  if (through_.order_by.present) {  // the live ones, in the order of their fields
    std::vector<const EntityRecord*> entities = source.Entities(target_type_, linked);
    SortAsConfigured(through_.order_by, &entities);
    linked.clear();
    for (const EntityRecord* entity : entities) linked.push_back(entity->key.id);
  } else if (through_.link_order_by.present) {
    // Each linked entity where its pair's first link row sorts.
    linked = source.PairedInLinkOrder(through_.link, through_.from, root.key.id, through_.to,
                                      through_.link_order_by);
    std::vector<std::string> live;
    for (const std::string& id : linked) {
      if (target(id) != nullptr) live.push_back(id);
    }
    linked = std::move(live);
  }
  if (limit_) {
    std::vector<std::string> live = LiveOnly(linked, target);
    if (live.size() > *limit_) live.resize(*limit_);
    linked = std::move(live);
  }
  return Show(linked, target, out, allocator);
}

bool LinkedSelectionDerivation::Show(const std::vector<std::string>& linked,
                                     const TargetOf& target, JsonValue* out,
                                     JsonAllocator& allocator) const {
  out->SetArray();
  for (const std::string& id : linked) {
    const EntityRecord* live = target(id);
    if (live == nullptr && !missing_as_null_) continue;
    JsonValue item;
    if (live != nullptr) ApplySelection(select_, id, *live->data, &item, allocator);
    out->PushBack(item, allocator);
  }
  return true;
}

bool LinkedSelectionDerivation::ShownChanged(const EntityChange& change) const {
  return LinkedDerivation::ShownChanged(change) ||
         SelectionChanged(select_, *change.before, *change.after);
}

std::vector<std::string> LinkedDerivation::LiveOnly(const std::vector<std::string>& linked,
                                                    const TargetOf& target) {
  std::vector<std::string> out;
  for (const std::string& id : linked) {
    if (target(id) != nullptr) out.push_back(id);
  }
  return out;
}

}  // namespace denormd
