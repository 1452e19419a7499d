#include "projections/derivations/linked.h"

#include <algorithm>
#include <set>

#include "projections/derivations/registry.h"
#include "projections/reference_index.h"

namespace denormd {

namespace {

std::string Quote(const std::string& text) { return "\"" + text + "\""; }

}  // namespace

std::string ThroughSpec::Normalized() const {
  return JoinWords({"through", link, "from", from.text, "to", to.text});
}

bool UsesThrough(const ExpressionReader& reader) {
  return reader.Has("through") || reader.Has("from") || reader.Has("to");
}

bool ReadThrough(ExpressionReader& reader, const std::string& alternative,
                 std::optional<ThroughSpec>* out) {
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
  if (ok && spec.from.text == spec.to.text) {
    reader.Error("to", "\"from\" and \"to\" must be two different fields of the link entity " +
                           Quote(spec.link));
    ok = false;
  }
  if (ok) *out = std::move(spec);
  return ok;
}

LinkedDerivation::LinkedDerivation(const ThroughSpec& spec, std::string target_type,
                                   PlanBuilder& plan)
    : through_(spec),
      target_type_(std::move(target_type)),
      projection_(plan.projection_index()),
      link_(plan.UseLink(spec.link, spec.from, spec.to)),
      linked_(plan.UseLinkedRelation(link_, target_type_)) {}

std::vector<std::string> LinkedDerivation::DependsOn() const {
  if (link_.link_type() == target_type_) return {target_type_};
  return {link_.link_type(), target_type_};
}

void LinkedDerivation::CollectAffected(const EntityChange& change, AffectedUnits* out) const {
  if (change.key.type == link_.link_type()) {
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
  return IsLive(*change.before) != IsLive(*change.after);
}

Status LinkedDerivation::Read(StoreTransaction& txn, const std::vector<const EntityRecord*>& roots,
                              std::unique_ptr<DerivationReads>* out) const {
  std::vector<std::string> ids;
  for (const EntityRecord* root : roots) ids.push_back(root->key.id);
  std::vector<Referrer> referrers;
  DENORMD_RETURN_IF_ERROR(ReadReferrers(txn.index(), linked_, ids,
                                        ReferenceIndex::Read::kKeysAndData, &referrers));
  auto reads = std::make_unique<LinkedReads>();
  for (Referrer& referrer : referrers) {
    reads->linked[referrer.target].push_back(referrer.entity.key.id);
    const std::string id = referrer.entity.key.id;
    reads->live.emplace(id, std::move(referrer.entity));
  }
  for (auto& entry : reads->linked) std::sort(entry.second.begin(), entry.second.end());
  *out = std::move(reads);
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
  std::vector<EntityKey> keys;
  for (const std::string& target : targets) keys.push_back({target_type_, target});
  std::vector<EntityRecord> records;
  DENORMD_RETURN_IF_ERROR(txn.source().LoadEntities(keys, &records));
  for (EntityRecord& record : records) {
    if (record.live()) reads->live[record.key.id] = std::move(record);
  }
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
  return Show(source.Paired(through_.link, through_.from, root.key.id, through_.to),
              [&](const std::string& id) { return source.Entity(target_type_, id); }, out,
              allocator);
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
