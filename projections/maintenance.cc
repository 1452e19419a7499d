#include "projections/maintenance.h"

#include <algorithm>
#include <deque>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "common/text.h"
#include "projections/linked_rows.h"

namespace denormd {

namespace {

// Pages through one sorted key sequence of a projection.
class KeyCursor {
 public:
  using Fetch = std::function<Status(StoreTransaction*, const std::string& after, size_t limit,
                                     std::vector<std::string>* out)>;
  KeyCursor(Fetch fetch, size_t page) : fetch_(std::move(fetch)), page_(page) {}

  // The next key without consuming it; nullptr at the end.
  Status Peek(StoreTransaction* txn, const std::string** key) {
    if (buffer_.empty() && !done_) {
      std::vector<std::string> next;
      DENORMD_RETURN_IF_ERROR(fetch_(txn, last_, page_, &next));
      if (next.size() < page_) done_ = true;
      for (std::string& k : next) buffer_.push_back(std::move(k));
      if (!buffer_.empty()) last_ = buffer_.back();
    }
    *key = buffer_.empty() ? nullptr : &buffer_.front();
    return Status::Ok();
  }
  void Pop() { buffer_.pop_front(); }

 private:
  Fetch fetch_;
  size_t page_;
  std::deque<std::string> buffer_;
  std::string last_;
  bool done_ = false;
};

// Calls `visit` with pages of the units of `projection` (the units the
// source has, merged with those the stored documents belong to), each page
// in its own transaction.
Status ForEachUnitPage(const Projection& projection, Store* store, size_t page_size,
                       const std::function<Status(StoreTransaction&,
                                                  const std::set<std::string>&)>& visit) {
  KeyCursor sources(
      [&](StoreTransaction* txn, const std::string& after, size_t limit,
          std::vector<std::string>* out) {
        return projection.ListSourceUnits(*txn, after, limit, out);
      },
      page_size);
  KeyCursor documents(
      [&](StoreTransaction* txn, const std::string& after, size_t limit,
          std::vector<std::string>* out) {
        return projection.ListStoredUnits(*txn, after, limit, out);
      },
      page_size);
  while (true) {
    std::unique_ptr<StoreTransaction> txn;
    DENORMD_RETURN_IF_ERROR(store->Begin(&txn));
    std::set<std::string> page;
    while (page.size() < page_size) {
      const std::string *a = nullptr, *b = nullptr;
      DENORMD_RETURN_IF_ERROR(sources.Peek(txn.get(), &a));
      DENORMD_RETURN_IF_ERROR(documents.Peek(txn.get(), &b));
      if (a == nullptr && b == nullptr) break;
      if (b == nullptr || (a != nullptr && *a <= *b)) {
        if (b != nullptr && *a == *b) documents.Pop();
        page.insert(*a);
        sources.Pop();
      } else {
        page.insert(*b);
        documents.Pop();
      }
    }
    if (page.empty()) return Status::Ok();
    DENORMD_RETURN_IF_ERROR(visit(*txn, page));
    DENORMD_RETURN_IF_ERROR(txn->Commit());
  }
}

Status SelectProjections(const Config& config, const std::vector<std::string>& names,
                         std::vector<size_t>* out) {
  for (size_t p = 0; p < config.projections.size(); ++p) {
    if (names.empty()) out->push_back(p);
  }
  for (const std::string& name : names) {
    const ProjectionConfig* projection = config.FindProjection(name);
    if (projection == nullptr) {
      std::string known;
      for (const ProjectionConfig& c : config.projections) known += (known.empty() ? "" : ", ") + c.name;
      return Status::InvalidInput("no projection named \"" + name + "\" (known: " + known + ")");
    }
    out->push_back(static_cast<size_t>(projection - config.projections.data()));
  }
  return Status::Ok();
}

}  // namespace

Status RewriteIndexRows(StoreTransaction& txn, const std::vector<EntityKey>& keys,
                        const IndexRowsOf& rows_of, const std::vector<const Relation*>& linked,
                        uint64_t* entities) {
  if (keys.empty()) return Status::Ok();
  std::vector<std::string> locks;
  for (const EntityKey& key : keys) locks.push_back(EntityLockKey(key.type, key.id));
  DENORMD_RETURN_IF_ERROR(txn.locks().LockKeys(locks, WriteLocks::Mode::kWait));
  std::vector<EntityRecord> records;
  DENORMD_RETURN_IF_ERROR(txn.source().LoadEntities(keys, &records));
  std::vector<EntityWrite> writes;
  for (EntityRecord& record : records) {
    EntityWrite write;
    write.added = rows_of(record);
    write.record = std::move(record);
    write.replace_all = true;
    writes.push_back(std::move(write));
  }
  if (writes.empty()) return Status::Ok();
  DENORMD_RETURN_IF_ERROR(txn.source().WriteEntities(writes));
  *entities += writes.size();
  LinkedCandidates restored;
  AddLinkedEntities(linked, keys, &restored);
  return ReconcileLinkedRows(txn, restored, nullptr);
}

Status ReindexTypes(Store* store, const std::vector<std::string>& types,
                    const IndexRowsOf& rows_of, const std::vector<const Relation*>& linked,
                    const MaintenanceOptions& options, uint64_t* entities) {
  std::set<std::string> link_types;
  for (const Relation* relation : linked) link_types.insert(relation->link()->link_type());
  std::vector<std::string> ordered = types;
  std::stable_partition(ordered.begin(), ordered.end(),
                        [&](const std::string& type) { return link_types.count(type) > 0; });
  for (const std::string& type : ordered) {
    std::string after;
    while (true) {
      std::unique_ptr<StoreTransaction> txn;
      DENORMD_RETURN_IF_ERROR(store->Begin(&txn));
      std::vector<std::string> ids;
      DENORMD_RETURN_IF_ERROR(txn->source().ListEntityIds(type, after, options.page_size, &ids));
      if (ids.empty()) break;
      after = ids.back();
      std::vector<EntityKey> keys;
      for (const std::string& id : ids) keys.push_back({type, id});
      DENORMD_RETURN_IF_ERROR(txn->locks().LockWriters(/*exclusive=*/false));
      DENORMD_RETURN_IF_ERROR(RewriteIndexRows(*txn, keys, rows_of, linked, entities));
      DENORMD_RETURN_IF_ERROR(txn->Commit());
      if (options.on_page) options.on_page("index: " + type, *entities);
    }
  }
  return Status::Ok();
}

Status Reindex(const ProjectionPlan& plan, Store* store, const MaintenanceOptions& options,
               uint64_t* entities) {
  std::vector<std::string> types;
  for (const std::string& type : plan.config().entities) {
    if (!plan.ForType(type).relations.empty()) types.push_back(type);
  }
  DENORMD_RETURN_IF_ERROR(ReindexTypes(
      store, types, [&plan](const EntityRecord& record) { return plan.ReferenceRowsOf(record); },
      plan.linked_relations(), options, entities));
  // Counters that drifted from their rows are set from the rows.
  std::unique_ptr<StoreTransaction> txn;
  DENORMD_RETURN_IF_ERROR(store->Begin(&txn));
  DENORMD_RETURN_IF_ERROR(txn->locks().LockWriters(/*exclusive=*/true));
  DENORMD_RETURN_IF_ERROR(txn->index().RecountTargets());
  return txn->Commit();
}

Status Rebuild(const ProjectionPlan& plan, Store* store, const MaintenanceOptions& options,
               BatchStats* stats) {
  std::vector<size_t> selected;
  DENORMD_RETURN_IF_ERROR(SelectProjections(plan.config(), options.projections, &selected));
  for (size_t p : selected) {
    const Projection& projection = plan.projection(p);
    uint64_t done = 0;
    DENORMD_RETURN_IF_ERROR(ForEachUnitPage(
        projection, store, options.page_size,
        [&](StoreTransaction& txn, const std::set<std::string>& units) {
          std::set<std::string> sampled;
          const std::set<std::string>* chosen = &units;
          if (options.unit_filter) {
            for (const std::string& unit : units) {
              if (options.unit_filter(unit)) sampled.insert(unit);
            }
            chosen = &sampled;
          }
          done += units.size();
          if (chosen->empty()) return Status::Ok();
          std::vector<std::string> locks;
          for (const std::string& unit : *chosen) locks.push_back(projection.LockKey(unit));
          txn.SetChangeSource("rebuild");
          DENORMD_RETURN_IF_ERROR(txn.locks().LockWriters(/*exclusive=*/false));
          DENORMD_RETURN_IF_ERROR(txn.locks().LockKeys(locks, WriteLocks::Mode::kWait));
          DENORMD_RETURN_IF_ERROR(projection.Recompute(txn, *chosen, nullptr, nullptr, stats));
          if (options.on_page) options.on_page(projection.config().name, done);
          return Status::Ok();
        }));
  }
  return Status::Ok();
}

namespace {

// At most `sample` of `keys` (all when 0 or when there are fewer), chosen
// uniformly at random by reservoir sampling with a fixed seed: the same
// store gives the same sample, ascending.
std::vector<std::string> Sample(std::vector<std::string> keys, uint64_t sample) {
  if (sample == 0 || keys.size() <= sample) return keys;
  std::mt19937_64 random(20261127);
  std::vector<std::string> chosen(keys.begin(), keys.begin() + sample);
  for (size_t i = sample; i < keys.size(); ++i) {
    const uint64_t j = random() % (i + 1);
    if (j < sample) chosen[j] = std::move(keys[i]);
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

SourceView::Naming NamingOf(const Relation& relation) {
  return relation.flavour() == Relation::Flavour::kGroup ? SourceView::Naming::kString
                                                         : SourceView::Naming::kReferences;
}

// The sort key of the row of `entity` under `from` in a kLinked relation:
// none by id; the entity's in an order of its fields; in a link order, that
// of the first (least) link row pairing the two.
std::string LinkedSortKey(const Relation& relation, const EntityRecord& entity,
                          const std::string& from, SourceView& source) {
  const Relation* ordered_pairs = relation.ordered_pairs();
  if (ordered_pairs == nullptr) return relation.SortKey(entity.key.id, *entity.data);
  const Link& link = *relation.link();
  const EntityRecord* first = nullptr;
  for (const EntityRecord* row :
       source.Entities(link.link_type(),
                       source.ReferrerIds(link.link_type(), link.to().path(),
                                          SourceView::Naming::kReferences, entity.key.id))) {
    const std::vector<std::string> named = SourceView::NamedIds(
        link.from().path(), SourceView::Naming::kReferences, row->key.id, *row->data);
    if (!std::binary_search(named.begin(), named.end(), from)) continue;
    if (first == nullptr || OrderedBefore(*ordered_pairs->order(), *row, *first)) first = row;
  }
  return first == nullptr ? "" : ordered_pairs->SortKey(first->key.id, *first->data);
}

// How many referrers `target` has in `relation` by the source's own count.
uint64_t DefinedCount(const Relation& relation, const std::string& target, SourceView& source) {
  const std::string& type = relation.entity_type();
  switch (relation.flavour()) {
    case Relation::Flavour::kReferences:
    case Relation::Flavour::kGroup:
      break;
    case Relation::Flavour::kPairs: {  // the link rows naming both ids
      // (path() is the link's `from`, pair_to() its `to`)
      std::string from, to;
      if (!Link::SplitPairKey(target, &from, &to)) return 0;
      const std::vector<std::string>& a =
          source.ReferrerIds(type, relation.path(), SourceView::Naming::kReferences, from);
      const std::vector<std::string>& b =
          source.ReferrerIds(type, *relation.pair_to(), SourceView::Naming::kReferences, to);
      const std::vector<std::string>& fewer = a.size() <= b.size() ? a : b;
      const std::vector<std::string>& more = a.size() <= b.size() ? b : a;
      uint64_t both = 0;
      for (const std::string& id : fewer) {
        if (std::binary_search(more.begin(), more.end(), id)) ++both;
      }
      return both;
    }
    case Relation::Flavour::kLinked: {  // the live entities paired with it
      const Link& link = *relation.link();
      uint64_t live = 0;
      for (const std::string& id :
           source.Paired(link.link_type(), link.from().path(), target, link.to().path())) {
        if (source.Entity(type, id) != nullptr) ++live;
      }
      return live;
    }
  }
  return source.ReferrerIds(type, relation.path(), NamingOf(relation), target).size();
}

// The (relation, target) pairs whose counters a page checked: each is
// checked once, not once per page that names it (a target with 100,000
// referrers is named by a hundred pages, and counting its rows is O(rows)).
using CheckedCounters = std::set<std::pair<const Relation*, std::string>>;

// One page of entities of `type`: their stored index rows against the rows
// their data names now; and the counter of each target they name that is not
// in *checked yet against its rows and against the source's own count of its
// referrers.
Status VerifyIndexPage(const ProjectionPlan& plan, StoreTransaction& txn, SourceView& source,
                       const std::string& type, const std::vector<std::string>& ids,
                       CheckedCounters* checked, std::vector<std::string>* differences) {
  std::vector<EntityKey> keys;
  for (const std::string& id : ids) keys.push_back({type, id});
  std::vector<EntityRecord> records;
  DENORMD_RETURN_IF_ERROR(txn.source().LoadEntities(keys, &records));
  std::vector<ReferenceIndex::StoredRow> stored;
  DENORMD_RETURN_IF_ERROR(txn.index().RowsOf(keys, &stored));
  using Place = std::tuple<std::string, std::string, std::string>;  // id, relation, target
  std::map<Place, std::string> have, want;  // -> sort key
  // Rows of relations this config does not keep are not its concern: a
  // running `denormd apply` builds the next config's (and removes them if
  // it dies; the apply after it too).
  std::set<std::string> kept;
  for (const Relation* relation : plan.ForType(type).relations) kept.insert(relation->name());
  for (const ReferenceIndex::StoredRow& row : stored) {
    if (!kept.count(row.relation)) continue;
    have[{row.entity.id, row.relation, row.target}] = row.sort;
  }
  for (const EntityRecord& record : records) {
    for (const ReferenceRow& row : plan.ReferenceRowsOf(record)) {
      want[{record.key.id, row.relation->name(), row.target}] = row.sort;
    }
  }
  // The rows kept through a link, by their definition (linked_rows.h): a
  // live entity's row under each id a live link row pairs it with.
  std::map<Place, std::string> linked_rows;
  DENORMD_RETURN_IF_ERROR(source.Gather([&] {
    linked_rows.clear();
    for (const Relation* relation : plan.ForType(type).relations) {
      if (relation->flavour() != Relation::Flavour::kLinked) continue;
      const Link& link = *relation->link();
      for (const EntityRecord& record : records) {
        if (!record.live()) continue;
        for (const std::string& from : source.Paired(link.link_type(), link.to().path(),
                                                     record.key.id, link.from().path())) {
          linked_rows[{record.key.id, relation->name(), from}] =
              LinkedSortKey(*relation, record, from, source);
        }
      }
    }
    return Status::Ok();
  }));
  want.insert(linked_rows.begin(), linked_rows.end());
  auto where = [&](const Place& place) {
    return "reference index: " + type + " " + std::get<0>(place) + " under " +
           std::get<2>(place) + " [" + std::get<1>(place) + "]: ";
  };
  for (const auto& row : want) {
    auto found = have.find(row.first);
    if (found == have.end()) {
      differences->push_back(where(row.first) + "missing row (order key " +
                             PrintableBytes(row.second) + ")");
    } else if (found->second != row.second) {
      differences->push_back(where(row.first) + "order key " + PrintableBytes(found->second) +
                             ", expected " + PrintableBytes(row.second));
    }
  }
  for (const auto& row : have) {
    if (!want.count(row.first)) {
      differences->push_back(where(row.first) + "unexpected row (order key " +
                             PrintableBytes(row.second) + ")");
    }
  }
  // The counters of the targets this page names (a link's sides and pairs
  // keep none: Relation::counted).
  for (const Relation* relation : plan.ForType(type).relations) {
    if (!relation->counted()) continue;
    std::vector<IndexRange> whole, rows;
    std::set<std::string> targets;
    for (const auto& row : want) {
      if (std::get<1>(row.first) != relation->name()) continue;
      if (checked->insert({relation, std::get<2>(row.first)}).second) {
        targets.insert(std::get<2>(row.first));
      }
    }
    if (targets.empty()) continue;
    for (const std::string& target : targets) {
      whole.push_back({target, std::nullopt, false, 0});
      rows.push_back({target, IndexKey{"", ""}, false, 0});
    }
    std::map<std::string, uint64_t> counted, counters;
    DENORMD_RETURN_IF_ERROR(txn.index().Count(*relation, whole, &counters));
    DENORMD_RETURN_IF_ERROR(txn.index().Count(*relation, rows, &counted));
    std::map<std::string, uint64_t> defined;  // the source's own count
    DENORMD_RETURN_IF_ERROR(source.Gather([&] {
      for (const std::string& target : targets) {
        defined[target] = DefinedCount(*relation, target, source);
      }
      return Status::Ok();
    }));
    for (const std::string& target : targets) {
      const std::string name = "reference index counter: " + type + " [" + relation->name() +
                               "] -> " + target + ": ";
      if (counters[target] != defined[target]) {
        differences->push_back(name + std::to_string(counters[target]) + ", the source says " +
                               std::to_string(defined[target]));
      } else if (counters[target] != counted[target]) {
        differences->push_back(name + std::to_string(counters[target]) + ", the index rows are " +
                               std::to_string(counted[target]));
      }
    }
  }
  return Status::Ok();
}

Status VerifyIndex(const ProjectionPlan& plan, StoreTransaction& txn, SourceView& source,
                   const MaintenanceOptions& options, std::vector<std::string>* differences) {
  CheckedCounters checked;
  for (const std::string& type : plan.config().entities) {
    if (plan.ForType(type).relations.empty()) continue;
    std::vector<std::string> all;
    std::string after;
    while (true) {
      std::vector<std::string> ids;
      DENORMD_RETURN_IF_ERROR(txn.source().ListEntityIds(type, after, options.page_size, &ids));
      if (ids.empty()) break;
      after = ids.back();
      all.insert(all.end(), ids.begin(), ids.end());
    }
    const std::vector<std::string> chosen = Sample(std::move(all), options.sample);
    for (size_t start = 0; start < chosen.size(); start += options.page_size) {
      std::vector<std::string> page(
          chosen.begin() + start,
          chosen.begin() + std::min(chosen.size(), start + options.page_size));
      DENORMD_RETURN_IF_ERROR(
          VerifyIndexPage(plan, txn, source, type, page, &checked, differences));
      if (options.on_page) options.on_page("index: " + type, start + page.size());
    }
  }
  return Status::Ok();
}

// Every unit of `projection` that verify checks: those the source defines
// and those stored documents belong to, merged (a sample of them).
Status UnitsToVerify(const Projection& projection, StoreTransaction& txn, SourceView& source,
                     const MaintenanceOptions& options, std::vector<std::string>* out) {
  std::vector<std::string> defined, stored;
  DENORMD_RETURN_IF_ERROR(projection.ListDefinedUnits(txn, source, &defined));
  std::string after;
  while (true) {
    std::vector<std::string> keys;
    DENORMD_RETURN_IF_ERROR(projection.ListStoredUnits(txn, after, options.page_size, &keys));
    if (keys.empty()) break;
    after = keys.back();
    stored.insert(stored.end(), keys.begin(), keys.end());
  }
  std::sort(defined.begin(), defined.end());
  std::vector<std::string> all;
  std::set_union(defined.begin(), defined.end(), stored.begin(), stored.end(),
                 std::back_inserter(all));
  *out = Sample(std::move(all), options.sample);
  return Status::Ok();
}

}  // namespace

Status Verify(const ProjectionPlan& plan, Store* store, const MaintenanceOptions& options,
              std::vector<std::string>* differences) {
  std::vector<size_t> selected;
  DENORMD_RETURN_IF_ERROR(SelectProjections(plan.config(), options.projections, &selected));
  // One snapshot for the whole check: the source, the index and the
  // documents as of one moment, whatever running daemons commit meanwhile.
  std::unique_ptr<StoreTransaction> txn;
  DENORMD_RETURN_IF_ERROR(store->Begin(&txn));
  DENORMD_RETURN_IF_ERROR(txn->PinReadSnapshot());
  SourceView source(*txn);
  if (options.projections.empty()) {
    DENORMD_RETURN_IF_ERROR(VerifyIndex(plan, *txn, source, options, differences));
  }
  for (size_t p : selected) {
    const Projection& projection = plan.projection(p);
    std::vector<std::string> units;
    DENORMD_RETURN_IF_ERROR(UnitsToVerify(projection, *txn, source, options, &units));
    for (size_t start = 0; start < units.size(); start += options.page_size) {
      std::vector<std::string> page(
          units.begin() + start, units.begin() + std::min(units.size(), start + options.page_size));
      DENORMD_RETURN_IF_ERROR(projection.VerifyFromSource(*txn, source, page, differences));
      if (options.on_page) options.on_page(projection.config().name, start + page.size());
    }
  }
  return txn->Commit();
}

}  // namespace denormd
