#include "projections/source_view.h"

#include <algorithm>
#include <cstring>

namespace denormd {

namespace {

constexpr size_t kScanPage = 1000;
constexpr int kMaxGatherRounds = 8;

// The rank of a present value's JSON type in the configured order.
int TypeRank(const JsonValue& value) {
  if (value.IsNumber()) return 0;
  if (value.IsString()) return 1;
  if (value.IsBool()) return 2;
  if (value.IsArray()) return 3;
  return 4;  // object
}

// <0, 0, >0: how two present values compare, ascending.
int ComparePresent(const JsonValue& a, const JsonValue& b) {
  const int ra = TypeRank(a), rb = TypeRank(b);
  if (ra != rb) return ra < rb ? -1 : 1;
  switch (ra) {
    case 0: {
      const double x = a.GetDouble(), y = b.GetDouble();
      return x < y ? -1 : (y < x ? 1 : 0);
    }
    case 1: {
      const size_t la = a.GetStringLength(), lb = b.GetStringLength();
      const int c = std::memcmp(a.GetString(), b.GetString(), std::min(la, lb));
      if (c != 0) return c;
      return la < lb ? -1 : (lb < la ? 1 : 0);
    }
    case 2:
      return a.GetBool() == b.GetBool() ? 0 : (a.GetBool() ? 1 : -1);
    default:
      return 0;  // arrays among arrays, objects among objects: equal
  }
}

}  // namespace

std::vector<std::string> SourceView::NamedIds(const Path& path, Naming naming,
                                              const std::string& id, const JsonValue& data) {
  JsonDocument scratch_doc;
  JsonValue scratch;
  const JsonValue* value = EvalPath(path, id, data, &scratch, scratch_doc.GetAllocator());
  std::vector<std::string> ids;
  if (value == nullptr) return ids;
  if (value->IsString()) {
    ids.emplace_back(value->GetString(), value->GetStringLength());
  } else if (naming == Naming::kReferences && value->IsArray()) {
    for (const JsonValue& element : value->GetArray()) {
      if (element.IsString()) ids.emplace_back(element.GetString(), element.GetStringLength());
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

Status SourceView::GroupsOf(const std::string& type, const Path& path, Naming naming,
                            const Groups** out) {
  const GroupKey key{type, path.text, naming};
  auto found = groups_.find(key);
  if (found != groups_.end()) {
    *out = &found->second;
    return Status::Ok();
  }
  // Both namings of the path in one pass (buckets group by the string a
  // field holds, embeds by the same field as a reference): one scan a path.
  Groups groups, strings;
  std::string after;
  while (true) {
    std::vector<std::string> ids;
    DENORMD_RETURN_IF_ERROR(txn_.source().ListEntityIds(type, after, kScanPage, &ids));
    if (ids.empty()) break;
    after = ids.back();
    std::vector<EntityKey> keys;
    for (const std::string& id : ids) keys.push_back({type, id});
    std::vector<EntityRecord> records;
    DENORMD_RETURN_IF_ERROR(txn_.source().LoadEntities(keys, &records));
    for (const EntityRecord& record : records) {
      if (!record.live()) continue;
      // Ids come in ascending order, so each list is.
      for (const std::string& target :
           NamedIds(path, Naming::kReferences, record.key.id, *record.data)) {
        groups[target].push_back(record.key.id);
      }
      for (const std::string& group : NamedIds(path, Naming::kString, record.key.id, *record.data)) {
        strings[group].push_back(record.key.id);
      }
    }
    if (ids.size() < kScanPage) break;
  }
  groups_[GroupKey{type, path.text, Naming::kReferences}] = std::move(groups);
  groups_[GroupKey{type, path.text, Naming::kString}] = std::move(strings);
  *out = &groups_.at(key);
  return Status::Ok();
}

const std::vector<std::string>& SourceView::ReferrerIds(const std::string& type, const Path& path,
                                                        Naming naming, const std::string& target) {
  static const std::vector<std::string> kNone;
  const Groups* groups = nullptr;
  Status status = GroupsOf(type, path, naming, &groups);
  if (!status.ok()) {
    if (error_.ok()) error_ = status;
    return kNone;
  }
  auto it = groups->find(target);
  return it == groups->end() ? kNone : it->second;
}

Status SourceView::Targets(const std::string& type, const Path& path, Naming naming,
                           std::vector<std::string>* out) {
  const Groups* groups = nullptr;
  DENORMD_RETURN_IF_ERROR(GroupsOf(type, path, naming, &groups));
  out->clear();
  for (const auto& group : *groups) out->push_back(group.first);
  return Status::Ok();
}

const EntityRecord* SourceView::Entity(const std::string& type, const std::string& id) {
  EntityKey key{type, id};
  auto it = loaded_.find(key);
  if (it == loaded_.end()) {
    missing_.insert(std::move(key));
    return nullptr;
  }
  return it->second.live() ? &it->second : nullptr;
}

std::vector<std::string> SourceView::Paired(const std::string& link_type, const Path& side,
                                            const std::string& id, const Path& other) {
  std::set<std::string> paired;
  for (const EntityRecord* row :
       Entities(link_type, ReferrerIds(link_type, side, Naming::kReferences, id))) {
    for (std::string& named : NamedIds(other, Naming::kReferences, row->key.id, *row->data)) {
      paired.insert(std::move(named));
    }
  }
  return std::vector<std::string>(paired.begin(), paired.end());
}

std::vector<const EntityRecord*> SourceView::Entities(const std::string& type,
                                                      const std::vector<std::string>& ids) {
  std::vector<const EntityRecord*> out;
  for (const std::string& id : ids) {
    if (const EntityRecord* record = Entity(type, id)) out.push_back(record);
  }
  return out;
}

Status SourceView::Gather(const std::function<Status()>& define) {
  loaded_.clear();
  for (int round = 0; round < kMaxGatherRounds; ++round) {
    missing_.clear();
    error_ = Status::Ok();
    DENORMD_RETURN_IF_ERROR(define());
    DENORMD_RETURN_IF_ERROR(error_);
    if (missing_.empty()) return Status::Ok();
    std::vector<EntityKey> keys(missing_.begin(), missing_.end());
    std::vector<EntityRecord> records;
    DENORMD_RETURN_IF_ERROR(txn_.source().LoadEntities(keys, &records));
    for (const EntityKey& key : keys) {  // absent ones as tombstones without a version
      EntityRecord absent;
      absent.key = key;
      absent.deleted = true;
      loaded_.emplace(key, std::move(absent));
    }
    for (EntityRecord& record : records) loaded_[record.key] = std::move(record);
  }
  return Status::Fatal("verify: a definition kept asking for more entities after " +
                       std::to_string(kMaxGatherRounds) + " rounds");
}

Status SourceView::ForEachChunk(
    const std::vector<std::string>& units,
    const std::function<Status(const std::vector<std::string>& chunk)>& visit) {
  size_t chunk_size = 1;  // grows while chunks load little: a first chunk may be huge
  for (size_t start = 0; start < units.size();) {
    const size_t end = std::min(units.size(), start + chunk_size);
    DENORMD_RETURN_IF_ERROR(visit(std::vector<std::string>(units.begin() + start, units.begin() + end)));
    start = end;
    if (loaded_.size() > kLoadBudget) {
      chunk_size = std::max<size_t>(1, chunk_size / 2);
    } else if (loaded_.size() < kLoadBudget / 4) {
      chunk_size = std::min(kMaxChunk, chunk_size * 2);
    }
    loaded_.clear();
  }
  return Status::Ok();
}

namespace {

// <0, 0, >0 as `a`'s value at the order's path comes before, with, or after
// `b`'s (ids aside).
int CompareOrderValues(const OrderBy& order, const EntityRecord& a, const EntityRecord& b) {
  if (!order.present) return 0;
  JsonDocument scratch_doc;
  JsonValue scratch_a, scratch_b;
  const JsonValue* va =
      EvalPath(order.path, a.key.id, *a.data, &scratch_a, scratch_doc.GetAllocator());
  const JsonValue* vb =
      EvalPath(order.path, b.key.id, *b.data, &scratch_b, scratch_doc.GetAllocator());
  const bool pa = va != nullptr && !va->IsNull(), pb = vb != nullptr && !vb->IsNull();
  if (pa != pb) return pa ? -1 : 1;  // present first, in either direction
  if (!pa) return 0;
  const int c = ComparePresent(*va, *vb);
  return order.descending ? -c : c;
}

}  // namespace

bool OrderedBefore(const OrderBy& order, const EntityRecord& a, const EntityRecord& b) {
  const int c = CompareOrderValues(order, a, b);
  if (c != 0) return c < 0;
  return a.key.id < b.key.id;
}

std::vector<std::string> SourceView::PairedInLinkOrder(const std::string& link_type,
                                                       const Path& side, const std::string& id,
                                                       const Path& other,
                                                       const OrderBy& order) {
  // Each paired id with its first link row (by value; any of equal ones).
  std::map<std::string, const EntityRecord*> first;
  for (const EntityRecord* row :
       Entities(link_type, ReferrerIds(link_type, side, Naming::kReferences, id))) {
    for (const std::string& named : NamedIds(other, Naming::kReferences, row->key.id, *row->data)) {
      auto at = first.find(named);
      if (at == first.end() || CompareOrderValues(order, *row, *at->second) < 0) {
        first[named] = row;
      }
    }
  }
  std::vector<std::pair<std::string, const EntityRecord*>> paired(first.begin(), first.end());
  std::stable_sort(paired.begin(), paired.end(), [&](const auto& a, const auto& b) {
    const int c = CompareOrderValues(order, *a.second, *b.second);
    return c != 0 ? c < 0 : a.first < b.first;
  });
  std::vector<std::string> out;
  for (const auto& entry : paired) out.push_back(entry.first);
  return out;
}

void SortAsConfigured(const OrderBy& order, std::vector<const EntityRecord*>* entities) {
  std::stable_sort(entities->begin(), entities->end(),
                   [&order](const EntityRecord* a, const EntityRecord* b) {
                     return OrderedBefore(order, *a, *b);
                   });
}

}  // namespace denormd
