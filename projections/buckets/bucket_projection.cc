#include "projections/buckets/bucket_projection.h"

#include <algorithm>
#include <map>

#include "common/text.h"

#include "projections/buckets/bucket_documents.h"
#include "projections/selection.h"

namespace denormd {

namespace {

constexpr size_t kGroupsPerChunk = 1000;

// A member's group and place in it, when it is in one.
struct Membership {
  std::string group;
  IndexKey key;
};

std::optional<Membership> MembershipOf(const Relation& relation, const EntityState& state) {
  std::vector<std::string> groups = relation.TargetsOf(state);
  if (groups.empty()) return std::nullopt;
  return Membership{std::move(groups[0]),
                    {relation.SortKey(state->key.id, *state->data), state->key.id}};
}

}  // namespace

BucketProjection::BucketProjection(const ProjectionConfig& config, size_t index,
                                   PlanBuilder& plan, uint64_t page_rows)
    : Projection(config, index),
      relation_(plan.UseRelation(config.buckets, config.by, &config.order_by,
                                 Relation::Flavour::kGroup)),
      packed_(config, relation_, page_rows),
      stable_(config, relation_,
              [this](StoreTransaction& txn, const std::vector<std::string>& groups,
                     BatchStats* stats) { return RewriteGroups(txn, groups, stats); }) {}

void BucketProjection::CollectAffected(const EntityChange& change, AffectedUnits* out) const {
  const std::optional<Membership> before = MembershipOf(relation_, *change.before);
  const std::optional<Membership> after = MembershipOf(relation_, *change.after);
  GroupChanges& groups = out->group_changes[index()];
  const std::string& id = change.key.id;
  if (before && after && before->group == after->group) {
    // In place (same key): only what its bucket shows of it may differ.
    if (before->key == after->key &&
        !SelectionChanged(config().select, *change.before, *change.after)) {
      return;
    }
    groups[after->group].push_back({id, before->key, after->key, true});
    out->AddUnit(index(), after->group);
    return;
  }
  if (before) {
    groups[before->group].push_back({id, before->key, std::nullopt, true});
    out->AddUnit(index(), before->group);
  }
  if (after) {
    groups[after->group].push_back({id, std::nullopt, after->key, true});
    out->AddUnit(index(), after->group);
  }
}

std::string BucketProjection::LockKey(const std::string& unit) const {
  return GroupLockKey(config().name, unit);
}

// The groups Recompute hands to ApplyChanges: those of `units` with changes.
GroupChanges BucketProjection::ChangedGroups(const std::set<std::string>& units,
                                             const GroupChanges* changes,
                                             std::vector<std::string>* whole) const {
  GroupChanges changed;
  for (const std::string& group : units) {
    auto found = changes == nullptr ? GroupChanges::const_iterator() : changes->find(group);
    if (changes != nullptr && found != changes->end()) {
      changed.insert(*found);
    } else if (whole != nullptr) {
      whole->push_back(group);
    }
  }
  return changed;
}

void BucketProjection::ReadAhead(StoreTransaction& txn, const std::set<std::string>& units,
                                 const GroupChanges* changes) const {
  if (!stable() || changes == nullptr) return;
  const GroupChanges changed = ChangedGroups(units, changes, nullptr);
  if (!changed.empty()) stable_.ReadAhead(txn, changed);
}

Status BucketProjection::Recompute(StoreTransaction& txn, const std::set<std::string>& units,
                                   const GroupChanges* changes,
                                   const RelationMoves* /*moves: entity projections only*/,
                                   BatchStats* stats) const {
  std::vector<std::string> whole;
  const GroupChanges changed = ChangedGroups(units, changes, &whole);
  if (!changed.empty()) {
    DENORMD_RETURN_IF_ERROR(stable() ? stable_.ApplyChanges(txn, changed, stats)
                                     : packed_.ApplyChanges(txn, changed, stats));
  }
  for (size_t start = 0; start < whole.size(); start += kGroupsPerChunk) {
    std::vector<std::string> chunk(whole.begin() + start,
                                   whole.begin() + std::min(whole.size(), start + kGroupsPerChunk));
    DENORMD_RETURN_IF_ERROR(RewriteGroups(txn, chunk, stats));
  }
  return Status::Ok();
}

Status BucketProjection::RewriteGroups(StoreTransaction& txn,
                                       const std::vector<std::string>& groups,
                                       BatchStats* stats) const {
  std::map<std::string, std::vector<DocumentRow>> built;
  DENORMD_RETURN_IF_ERROR(packed_.BuildGroups(txn, groups, &built));
  stats->units_recomputed += groups.size();
  std::vector<DocumentRow> upserts;
  std::set<std::string> kept;
  for (auto& group : built) {
    for (DocumentRow& row : group.second) {
      kept.insert(row.id);
      upserts.push_back(std::move(row));
    }
  }
  std::vector<DocumentRow> existing;
  DENORMD_RETURN_IF_ERROR(txn.documents().LoadByPk(config(), groups, &existing));
  std::vector<std::string> deletes;
  for (const DocumentRow& row : existing) {
    if (!kept.count(row.id)) deletes.push_back(row.id);
  }
  if (!upserts.empty()) {
    DENORMD_RETURN_IF_ERROR(txn.documents().Upsert(config(), upserts, &stats->documents_written));
  }
  if (!deletes.empty()) {
    DENORMD_RETURN_IF_ERROR(txn.documents().Delete(config(), deletes, &stats->documents_deleted));
  }
  return Status::Ok();
}

std::vector<Referrer> BucketProjection::DefinedMembers(SourceView& source, const std::string& group,
                                                      std::vector<std::string>* differences) const {
  const ProjectionConfig& projection = config();
  std::vector<const EntityRecord*> entities = source.Entities(
      projection.buckets,
      source.ReferrerIds(projection.buckets, projection.by, SourceView::Naming::kString, group));
  SortAsConfigured(projection.order_by, &entities);
  std::vector<Referrer> members;
  for (const EntityRecord* entity : entities) {
    Referrer member;
    member.target = group;
    if (projection.order_by.present) {
      JsonDocument scratch_doc;
      JsonValue scratch;
      member.sort = OrderKey(EvalPath(projection.order_by.path, entity->key.id, *entity->data,
                                      &scratch, scratch_doc.GetAllocator()),
                             projection.order_by.descending);
    }
    member.entity = *entity;
    if (!members.empty() && !(members.back().key() < member.key()) && differences != nullptr) {
      differences->push_back(projection.name + " (" + projection.collection + ") " + group +
                             ": the order key of " + member.entity.key.id + " (" +
                             PrintableBytes(member.sort) + ") does not sort after that of " +
                             members.back().entity.key.id + " (" +
                             PrintableBytes(members.back().sort) +
                             "), which the config's order puts first");
    }
    members.push_back(std::move(member));
  }
  return members;
}

Status BucketProjection::VerifyFromSource(StoreTransaction& txn, SourceView& source,
                                          const std::vector<std::string>& units,
                                          std::vector<std::string>* differences) const {
  const std::string where = config().name + " (" + config().collection + ") ";
  return source.ForEachChunk(units, [&](const std::vector<std::string>& chunk) {
    std::map<std::string, std::vector<Referrer>> members;
    std::vector<std::string> order_problems;
    DENORMD_RETURN_IF_ERROR(source.Gather([&] {
      members.clear();
      order_problems.clear();
      for (const std::string& group : chunk) {
        members[group] = DefinedMembers(source, group, &order_problems);
      }
      return Status::Ok();
    }));
    differences->insert(differences->end(), order_problems.begin(), order_problems.end());
    std::vector<DocumentRow> stored;
    DENORMD_RETURN_IF_ERROR(txn.documents().LoadByPk(config(), chunk, &stored));
    if (!stable()) {
      std::vector<DocumentRow> expected;
      for (const auto& group : members) {
        std::vector<const Referrer*> in_order;
        for (const Referrer& member : group.second) in_order.push_back(&member);
        AppendPackedMemberBuckets(config(), group.first, 0, in_order, &expected);
      }
      CompareDocuments(std::move(expected), stored, differences);
      return Status::Ok();
    }
    std::map<std::string, std::vector<DocumentRow>> rows;
    for (DocumentRow& row : stored) rows[row.pk.value_or("")].push_back(std::move(row));
    std::vector<std::string> problems;
    for (const std::string& group : chunk) {
      std::vector<const Referrer*> in_order;
      for (const Referrer& member : members[group]) in_order.push_back(&member);
      stable_.CheckGroup(group, in_order, std::move(rows[group]), &problems);
    }
    for (const std::string& problem : problems) differences->push_back(where + problem);
    return Status::Ok();
  });
}

Status BucketProjection::ListDefinedUnits(StoreTransaction& /*txn*/, SourceView& source,
                                          std::vector<std::string>* out) const {
  return source.Targets(config().buckets, config().by, SourceView::Naming::kString, out);
}

Status BucketProjection::ListSourceUnits(StoreTransaction& txn, const std::string& after,
                                         size_t limit, std::vector<std::string>* out) const {
  return txn.index().ListTargets(relation_, after, limit, out);
}

Status BucketProjection::ListStoredUnits(StoreTransaction& txn, const std::string& after,
                                         size_t limit, std::vector<std::string>* out) const {
  return txn.documents().ListKeys(config(), /*by_pk=*/true, after, limit, out);
}

}  // namespace denormd
