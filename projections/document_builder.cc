#include "projections/document_builder.h"

#include <algorithm>
#include <deque>
#include <set>
#include <tuple>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace denormd {

std::vector<std::string> ReferenceTargets(const Path& path, const std::string& id,
                                          const JsonValue& data) {
  std::vector<std::string> targets;
  JsonDocument scratch_doc;
  JsonValue scratch;
  const JsonValue* value = EvalPath(path, id, data, &scratch, scratch_doc.GetAllocator());
  if (value == nullptr) return targets;
  if (value->IsString()) {
    targets.emplace_back(value->GetString(), value->GetStringLength());
  } else if (value->IsArray()) {
    for (const JsonValue& element : value->GetArray()) {
      if (element.IsString()) targets.emplace_back(element.GetString(), element.GetStringLength());
    }
    std::sort(targets.begin(), targets.end());
    targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
  }
  return targets;
}

std::vector<std::string> RelationTargets(const Relation& relation, const std::string& id,
                                         const JsonValue& data) {
  if (!relation.strings_only) return ReferenceTargets(*relation.path, id, data);
  std::optional<std::string> value = StringAt(*relation.path, id, data);
  if (!value) return {};
  return {std::move(*value)};
}

std::optional<std::string> StringAt(const Path& path, const std::string& id,
                                    const JsonValue& data) {
  JsonDocument scratch_doc;
  JsonValue scratch;
  const JsonValue* value = EvalPath(path, id, data, &scratch, scratch_doc.GetAllocator());
  if (value == nullptr || !value->IsString()) return std::nullopt;
  return std::string(value->GetString(), value->GetStringLength());
}

std::string SortKey(const OrderBy* order, const std::string& id, const JsonValue& data) {
  if (order == nullptr || !order->present) return "";
  JsonDocument scratch_doc;
  JsonValue scratch;
  return OrderKey(EvalPath(order->path, id, data, &scratch, scratch_doc.GetAllocator()),
                  order->descending);
}

std::vector<ReferenceRow> ReferenceRowsOf(const ProjectionPlan& plan, const EntityRecord& record) {
  std::vector<ReferenceRow> rows;
  if (record.deleted || !record.data) return rows;
  for (const Relation& relation : plan.ForType(record.key.type).relations) {
    std::vector<std::string> targets = RelationTargets(relation, record.key.id, *record.data);
    if (targets.empty()) continue;
    std::string sort = SortKey(relation.order, record.key.id, *record.data);
    for (std::string& target : targets) rows.push_back({relation.name, std::move(target), sort});
  }
  return rows;
}

namespace {

// Evaluates a path, template or literal against one entity. Returns false when
// the value is missing (the field is then left out).
bool EvalScalarExpression(const Expression& expression, const std::string& id,
                          const JsonValue& data, JsonValue* out, JsonAllocator& allocator) {
  switch (expression.kind) {
    case Expression::Kind::kPath: {
      JsonValue scratch;
      const JsonValue* value = EvalPath(expression.path, id, data, &scratch, allocator);
      if (value == nullptr) return false;
      out->CopyFrom(*value, allocator);
      return true;
    }
    case Expression::Kind::kTemplate: {
      std::string text = RenderTemplate(expression.template_, id, data);
      out->SetString(text.data(), static_cast<rapidjson::SizeType>(text.size()), allocator);
      return true;
    }
    case Expression::Kind::kValue: {
      JsonDocument literal;
      if (!ParseJson(expression.value_json, &literal).ok()) return false;
      out->CopyFrom(literal, allocator);
      return true;
    }
    default:
      return false;  // relations are not allowed here; config validation rejects them
  }
}

void AddMember(JsonValue* object, const std::string& name, JsonValue& value,
               JsonAllocator& allocator) {
  JsonValue key(name.data(), static_cast<rapidjson::SizeType>(name.size()), allocator);
  object->AddMember(key, value, allocator);
}

// Sorts referrers into the relation's order: (sort key, id).
void SortReferrers(std::vector<const Referrer*>* referrers) {
  std::sort(referrers->begin(), referrers->end(), [](const Referrer* a, const Referrer* b) {
    if (a->sort != b->sort) return a->sort < b->sort;
    return a->entity.key.id < b->entity.key.id;
  });
}

std::optional<std::string> PartitionKeyOf(const std::string& partition_key, const JsonValue& doc) {
  if (partition_key.empty()) return std::nullopt;
  auto it = doc.FindMember(JsonValue(rapidjson::StringRef(partition_key.data(),
                                                          partition_key.size())));
  if (it == doc.MemberEnd() || it->value.IsNull()) return std::nullopt;
  if (it->value.IsString()) return std::string(it->value.GetString(), it->value.GetStringLength());
  return ToJson(it->value);
}

// Related entities prefetched for one relation field, for all units at once.
struct RelationData {
  std::vector<Referrer> referrers;                               // ids, embed
  std::map<std::string, std::vector<const Referrer*>> children;  // parent id -> children
  std::map<std::string, uint64_t> counts;                        // count: parent id -> count
  std::map<std::string, EntityRecord> targets;                   // lookup: id -> live target
};

Status Prefetch(StoreTransaction* txn, const Expression& expression,
                const std::vector<const EntityRecord*>& roots, RelationData* data) {
  std::vector<std::string> root_ids;
  for (const EntityRecord* root : roots) root_ids.push_back(root->key.id);
  switch (expression.kind) {
    case Expression::Kind::kCount:
      return txn->CountReferrers(expression.entity, RelationName(expression.via, nullptr, false),
                                 root_ids, &data->counts);
    case Expression::Kind::kIds:
      DENORMD_RETURN_IF_ERROR(txn->FindReferrers(
          expression.entity, RelationName(expression.via, nullptr, false), root_ids,
          &data->referrers));
      break;
    case Expression::Kind::kEmbed: {
      // With a limit only the first children in order are read, by index.
      std::string relation = RelationName(expression.via, &expression.order_by, false);
      if (expression.limit) {
        DENORMD_RETURN_IF_ERROR(txn->LoadFirstReferrers(expression.entity, relation, root_ids,
                                                        *expression.limit, &data->referrers));
      } else {
        DENORMD_RETURN_IF_ERROR(
            txn->LoadReferrers(expression.entity, relation, root_ids, &data->referrers));
      }
      break;
    }
    case Expression::Kind::kLookup: {
      std::set<std::string> ids;
      for (const EntityRecord* root : roots) {
        for (std::string& id : ReferenceTargets(expression.by, root->key.id, *root->data)) {
          ids.insert(std::move(id));
        }
      }
      std::vector<EntityKey> keys;
      for (const std::string& id : ids) keys.push_back({expression.entity, id});
      std::vector<EntityRecord> records;
      DENORMD_RETURN_IF_ERROR(txn->LoadEntities(keys, &records));
      for (EntityRecord& record : records) {
        if (!record.deleted) data->targets[record.key.id] = std::move(record);
      }
      return Status::Ok();
    }
    default:
      return Status::Ok();
  }
  for (const Referrer& referrer : data->referrers) {
    data->children[referrer.target].push_back(&referrer);
  }
  for (auto& entry : data->children) SortReferrers(&entry.second);
  return Status::Ok();
}

void LookupOne(const Expression& expression, const RelationData& data, const JsonValue& ref,
               JsonValue* out, bool* present, JsonAllocator& allocator) {
  *present = false;
  if (!ref.IsString()) return;
  auto it = data.targets.find(std::string(ref.GetString(), ref.GetStringLength()));
  if (it == data.targets.end()) return;
  ApplySelection(expression.select, it->second.key.id, *it->second.data, out, allocator);
  *present = true;
}

// Evaluates a field of an entity document. Returns false when missing.
bool EvalField(const Expression& expression, const EntityRecord& root, const RelationData& data,
               JsonValue* out, JsonAllocator& allocator) {
  static const std::vector<const Referrer*> kNone;
  const std::string& id = root.key.id;
  switch (expression.kind) {
    case Expression::Kind::kCount: {
      auto it = data.counts.find(id);
      out->SetUint64(it == data.counts.end() ? 0 : it->second);
      return true;
    }
    case Expression::Kind::kIds: {
      auto it = data.children.find(id);
      std::vector<std::string> ids;
      if (it != data.children.end()) {
        for (const Referrer* child : it->second) ids.push_back(child->entity.key.id);
      }
      std::sort(ids.begin(), ids.end());
      if (expression.limit && ids.size() > *expression.limit) ids.resize(*expression.limit);
      out->SetArray();
      for (const std::string& child_id : ids) {
        out->PushBack(JsonValue(child_id.data(), static_cast<rapidjson::SizeType>(child_id.size()),
                                allocator),
                      allocator);
      }
      return true;
    }
    case Expression::Kind::kEmbed: {
      auto it = data.children.find(id);
      const std::vector<const Referrer*>& children =
          it == data.children.end() ? kNone : it->second;  // sorted by Prefetch
      size_t n = children.size();
      if (expression.limit && n > *expression.limit) n = *expression.limit;
      out->SetArray();
      for (size_t i = 0; i < n; ++i) {
        const EntityRecord& child = children[i]->entity;
        JsonValue item;
        ApplySelection(expression.select, child.key.id, *child.data, &item, allocator);
        out->PushBack(item, allocator);
      }
      return true;
    }
    case Expression::Kind::kLookup: {
      JsonValue scratch;
      const JsonValue* ref = EvalPath(expression.by, id, *root.data, &scratch, allocator);
      if (ref == nullptr) return false;
      if (ref->IsArray()) {
        out->SetArray();
        for (const JsonValue& element : ref->GetArray()) {
          JsonValue item;
          bool present = false;
          LookupOne(expression, data, element, &item, &present, allocator);
          if (present) {
            out->PushBack(item, allocator);
          } else if (expression.missing == Expression::Missing::kNull) {
            out->PushBack(JsonValue(), allocator);
          }
        }
        return true;
      }
      bool present = false;
      LookupOne(expression, data, *ref, out, &present, allocator);
      if (!present) out->SetNull();
      return true;
    }
    default:
      return EvalScalarExpression(expression, id, *root.data, out, allocator);
  }
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

void ApplySelection(const Selection& selection, const std::string& id, const JsonValue& data,
                    JsonValue* out, JsonAllocator& allocator) {
  out->SetObject();
  switch (selection.kind) {
    case Selection::Kind::kWhole:
      for (auto it = data.MemberBegin(); it != data.MemberEnd(); ++it) {
        if (std::string(it->name.GetString(), it->name.GetStringLength()) == "id") continue;
        JsonValue value(it->value, allocator);
        JsonValue name(it->name, allocator);
        out->AddMember(name, value, allocator);
      }
      {
        JsonValue id_value(id.data(), static_cast<rapidjson::SizeType>(id.size()), allocator);
        AddMember(out, "id", id_value, allocator);
      }
      return;
    case Selection::Kind::kList:
      for (const std::string& field : selection.fields) {
        JsonValue value;
        if (field == "id") {
          value.SetString(id.data(), static_cast<rapidjson::SizeType>(id.size()), allocator);
        } else {
          auto it = data.FindMember(JsonValue(rapidjson::StringRef(field.data(), field.size())));
          if (it == data.MemberEnd()) continue;
          value.CopyFrom(it->value, allocator);
        }
        AddMember(out, field, value, allocator);
      }
      return;
    case Selection::Kind::kMap:
      for (const auto& entry : selection.map) {
        JsonValue value;
        if (EvalScalarExpression(entry.second, id, data, &value, allocator)) {
          AddMember(out, entry.first, value, allocator);
        }
      }
      return;
  }
}

Status DocumentBuilder::Build(StoreTransaction* txn, size_t projection,
                              const std::vector<std::string>& units,
                              std::map<std::string, std::vector<DocumentRow>>* out) const {
  const ProjectionConfig& config = plan_.config().projections[projection];
  if (config.kind == ProjectionConfig::Kind::kBuckets) {
    return BuildBucketDocuments(txn, config, units, out);
  }
  return BuildEntityDocuments(txn, config, units, out);
}

Status DocumentBuilder::BuildEntityDocuments(
    StoreTransaction* txn, const ProjectionConfig& projection, const std::vector<std::string>& ids,
    std::map<std::string, std::vector<DocumentRow>>* out) const {
  std::vector<EntityKey> keys;
  for (const std::string& id : ids) keys.push_back({projection.from, id});
  std::vector<EntityRecord> records;
  DENORMD_RETURN_IF_ERROR(txn->LoadEntities(keys, &records));
  std::vector<const EntityRecord*> roots;
  for (const EntityRecord& record : records) {
    if (!record.deleted && record.data) roots.push_back(&record);
  }
  for (const std::string& id : ids) (*out)[id].clear();

  std::vector<RelationData> relations(projection.fields.size());
  for (size_t f = 0; f < projection.fields.size(); ++f) {
    if (roots.empty()) break;
    DENORMD_RETURN_IF_ERROR(Prefetch(txn, projection.fields[f].second, roots, &relations[f]));
  }

  std::vector<std::string> derived_names;
  for (const auto& field : projection.fields) derived_names.push_back(field.first);

  for (const EntityRecord* root : roots) {
    JsonDocument doc(rapidjson::kObjectType);
    JsonAllocator& allocator = doc.GetAllocator();
    for (auto it = root->data->MemberBegin(); it != root->data->MemberEnd(); ++it) {
      std::string name(it->name.GetString(), it->name.GetStringLength());
      if (name == "id" || Contains(derived_names, name)) continue;
      if (projection.has_include && !Contains(projection.include, name)) continue;
      if (Contains(projection.exclude, name)) continue;
      JsonValue value(it->value, allocator);
      AddMember(&doc, name, value, allocator);
    }
    if (!Contains(derived_names, "id")) {
      JsonValue id_value(root->key.id.data(), static_cast<rapidjson::SizeType>(root->key.id.size()),
                         allocator);
      AddMember(&doc, "id", id_value, allocator);
    }
    for (size_t f = 0; f < projection.fields.size(); ++f) {
      JsonValue value;
      if (EvalField(projection.fields[f].second, *root, relations[f], &value, allocator)) {
        AddMember(&doc, projection.fields[f].first, value, allocator);
      }
    }
    DocumentRow row;
    row.id = root->key.id;
    row.pk = PartitionKeyOf(projection.partition_key, doc);
    row.json = ToJson(doc);
    (*out)[root->key.id].push_back(std::move(row));
  }
  return Status::Ok();
}

namespace {

// A member as its bucket shows it: the projection's selection, as JSON text.
std::string RenderItem(const ProjectionConfig& projection, const EntityRecord& member) {
  JsonDocument scratch;
  JsonValue item;
  ApplySelection(projection.select, member.key.id, *member.data, &item, scratch.GetAllocator());
  return ToJson(item);
}

// Bucket documents number `first`, `first`+1, ... of `group`, from the first
// `count` items of its members in order (starting with the first item of
// bucket `first`).
void AppendBuckets(const ProjectionConfig& projection, const std::string& group, uint64_t first,
                   const std::vector<std::string>& items, size_t count,
                   std::vector<DocumentRow>* rows) {
  for (size_t start = 0, n = first; start < count; start += projection.size, ++n) {
    const std::string id = group + ":" + std::to_string(n);
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
    w.StartObject();
    w.Key("id");
    w.String(id.data(), static_cast<rapidjson::SizeType>(id.size()));
    w.Key(projection.by.text.data(), static_cast<rapidjson::SizeType>(projection.by.text.size()));
    w.String(group.data(), static_cast<rapidjson::SizeType>(group.size()));
    w.Key(projection.field.data(), static_cast<rapidjson::SizeType>(projection.field.size()));
    w.StartArray();
    for (size_t i = start, end = std::min<size_t>(count, start + projection.size); i < end; ++i) {
      w.RawValue(items[i].data(), items[i].size(), rapidjson::kObjectType);
    }
    w.EndArray();
    w.EndObject();
    rows->push_back({id, group, std::string(buffer.GetString(), buffer.GetSize())});
  }
}

void AppendMemberBuckets(const ProjectionConfig& projection, const std::string& group,
                         uint64_t first, const std::vector<const Referrer*>& members,
                         std::vector<DocumentRow>* rows) {
  std::vector<std::string> items;
  items.reserve(members.size());
  for (const Referrer* member : members) items.push_back(RenderItem(projection, member->entity));
  AppendBuckets(projection, group, first, items, items.size(), rows);
}

std::string BucketRelation(const ProjectionConfig& projection) {
  return RelationName(projection.by, &projection.order_by, true);
}

}  // namespace

Status DocumentBuilder::BuildBucketDocuments(
    StoreTransaction* txn, const ProjectionConfig& projection,
    const std::vector<std::string>& groups,
    std::map<std::string, std::vector<DocumentRow>>* out) const {
  std::vector<Referrer> members;
  DENORMD_RETURN_IF_ERROR(
      txn->LoadReferrers(projection.buckets, BucketRelation(projection), groups, &members));
  std::map<std::string, std::vector<const Referrer*>> by_group;
  for (const std::string& group : groups) by_group[group];
  for (const Referrer& member : members) by_group[member.target].push_back(&member);
  for (auto& entry : by_group) {
    std::vector<DocumentRow>& rows = (*out)[entry.first];
    rows.clear();
    SortReferrers(&entry.second);
    AppendMemberBuckets(projection, entry.first, 0, entry.second, &rows);
  }
  return Status::Ok();
}

Status DocumentBuilder::BuildBucketTails(
    StoreTransaction* txn, size_t projection_index,
    const std::map<std::string, BucketBound>& bounds,
    const std::function<Status(std::vector<DocumentRow>* rows)>& emit,
    std::vector<std::string>* keep, uint64_t* rendered) const {
  const ProjectionConfig& projection = plan_.config().projections[projection_index];
  const std::string relation = BucketRelation(projection);
  // rank of the bound = members - members at or after it: both are cheap (a
  // counter row, and an index range as long as the changed tail).
  std::vector<std::string> groups;
  std::map<std::string, StoreTransaction::ReferrerBound> tails;
  for (const auto& bound : bounds) {
    groups.push_back(bound.first);
    if (bound.second.has_tail) tails[bound.first] = {bound.second.sort, bound.second.id, 0};
  }
  std::map<std::string, uint64_t> total, from, next_bucket;
  DENORMD_RETURN_IF_ERROR(txn->CountReferrers(projection.buckets, relation, groups, &total));
  DENORMD_RETURN_IF_ERROR(txn->CountReferrersFrom(projection.buckets, relation, tails, &from));
  for (auto& key : tails) {
    uint64_t rank = total[key.first] - std::min(total[key.first], from[key.first]);
    next_bucket[key.first] = rank / projection.size;
    key.second.before = rank - next_bucket[key.first] * projection.size;
  }
  const std::map<std::string, uint64_t> first_bucket = next_bucket;
  std::set<std::string> unspliced;
  DENORMD_RETURN_IF_ERROR(
      SpliceBucketTails(txn, projection, bounds, total, tails, &next_bucket, emit, &unspliced));
  *rendered = unspliced.size();
  if (!unspliced.empty()) {
    // From their first changed bucket again: what the splice wrote of them
    // is overwritten.
    std::map<std::string, StoreTransaction::ReferrerBound> rest;
    for (const std::string& group : unspliced) {
      rest[group] = tails[group];
      next_bucket[group] = first_bucket.at(group);
    }
    DENORMD_RETURN_IF_ERROR(RenderBucketTails(txn, projection, rest, &next_bucket, emit));
  }
  for (const auto& entry : next_bucket) {
    for (uint64_t n = 0; n < entry.second; ++n) keep->push_back(entry.first + ":" + std::to_string(n));
  }
  return BuildPointBuckets(txn, projection_index, bounds, total, emit);
}

namespace {

// One group's members in a page of a tail read, in order, without the member
// that a continued group re-reads as its page's bound; `more` when the
// group's tail goes on, with the bound of its next page in *next_pending.
struct TailPage {
  std::vector<const Referrer*> members;
  bool more = false;
};

// One group's tail being spliced: the stored buckets from the tail's first
// one on hold the items of the members before the batch, in order; walking
// the members now in order, an unchanged member takes the next stored item,
// a changed member's old item is dropped where its old key falls, and a
// changed member's new item is rendered from its entity.
struct TailSplice {
  uint64_t old_total = 0;    // members before the batch
  uint64_t old_buckets = 0;  // buckets stored before the batch
  uint64_t next_old = 0;     // the next stored bucket to read
  std::deque<std::string> old_items;                          // read, not yet taken
  std::vector<std::pair<std::string, std::string>> old_keys;  // in the tail, sorted
  size_t next_old_key = 0;
  bool started = false;  // old_keys trimmed to the tail
  bool sampled = false;  // one unchanged item compared with its entity
  std::vector<std::string> pool;  // items of buckets not yet emitted
  TailPage page;                  // the members of this round
  uint64_t read_to = 0;  // stored buckets [next_old, read_to) are read this page

  // How many items stored bucket `n` held before the batch.
  uint64_t StoredItems(uint64_t n, uint64_t size) const {
    return n + 1 < old_buckets ? size : old_total - (old_buckets - 1) * size;
  }

  bool TakeOldItem(std::string* item) {
    if (old_items.empty()) return false;
    *item = std::move(old_items.front());
    old_items.pop_front();
    return true;
  }

  // Drops the stored items of the changed members whose old key is at or
  // before `key` (all that are left when `key` is null). False when the
  // stored buckets ran out first.
  bool DropOldItemsThrough(const std::pair<std::string, std::string>* key) {
    for (; next_old_key < old_keys.size() && (key == nullptr || old_keys[next_old_key] <= *key);
         ++next_old_key) {
      if (old_items.empty()) return false;
      old_items.pop_front();
    }
    return true;
  }
};

// Members before the batch, from the members now and the batch's changes.
bool OldTotal(const BucketBound& bound, uint64_t total, uint64_t* out) {
  std::set<std::string> old_ids;
  for (const auto& key : bound.old_keys) old_ids.insert(key.second);
  uint64_t entered = 0, left = 0;
  for (const std::string& id : bound.fresh_ids) entered += old_ids.count(id) ? 0 : 1;
  for (const std::string& id : old_ids) left += bound.fresh_ids.count(id) ? 0 : 1;
  if (total + left < entered) return false;
  *out = total + left - entered;
  return true;
}

std::map<std::string, TailPage> SplitTailPage(
    const std::vector<Referrer>& loaded,
    const std::map<std::string, StoreTransaction::ReferrerBound>& pending,
    const std::set<std::string>& continued, uint64_t page_rows,
    std::map<std::string, StoreTransaction::ReferrerBound>* next_pending) {
  std::map<std::string, std::vector<const Referrer*>> by_group;
  for (const Referrer& member : loaded) by_group[member.target].push_back(&member);
  std::map<std::string, TailPage> pages;
  for (const auto& entry : pending) {
    const std::string& group = entry.first;
    std::vector<const Referrer*>& members = by_group[group];
    SortReferrers(&members);
    uint64_t forward = 0;
    for (const Referrer* m : members) {
      if (std::tie(m->sort, m->entity.key.id) >= std::tie(entry.second.sort, entry.second.id)) {
        ++forward;
      }
    }
    TailPage& page = pages[group];
    page.more = forward >= page_rows;
    if (page.more) {
      (*next_pending)[group] = {members.back()->sort, members.back()->entity.key.id, 0};
    }
    size_t skip = continued.count(group) && !members.empty() ? 1 : 0;
    page.members.assign(members.begin() + skip, members.end());
  }
  return pages;
}

}  // namespace

Status DocumentBuilder::SpliceBucketTails(
    StoreTransaction* txn, const ProjectionConfig& projection,
    const std::map<std::string, BucketBound>& bounds, std::map<std::string, uint64_t>& total,
    std::map<std::string, StoreTransaction::ReferrerBound> pending,
    std::map<std::string, uint64_t>* next_bucket,
    const std::function<Status(std::vector<DocumentRow>* rows)>& emit,
    std::set<std::string>* unspliced) const {
  const std::string relation = BucketRelation(projection);
  const uint64_t size = projection.size;
  // Items are matched by position, so a document whose keys collide cannot be
  // read back unambiguously: render those from the entities (and those whose
  // field name needs escaping, which SplitArrayField does not read).
  if (projection.field == "id" || projection.by.text == "id" ||
      projection.field == projection.by.text || NeedsJsonEscaping(projection.field)) {
    for (const auto& entry : pending) unspliced->insert(entry.first);
    return Status::Ok();
  }
  std::map<std::string, TailSplice> splices;
  for (auto it = pending.begin(); it != pending.end();) {
    const BucketBound& bound = bounds.at(it->first);
    TailSplice& splice = splices[it->first];
    if (!OldTotal(bound, total[it->first], &splice.old_total)) {
      unspliced->insert(it->first);
      splices.erase(it->first);
      it = pending.erase(it);
      continue;
    }
    splice.old_buckets = (splice.old_total + size - 1) / size;
    splice.next_old = (*next_bucket)[it->first];
    splice.old_keys = bound.old_keys;
    std::sort(splice.old_keys.begin(), splice.old_keys.end());
    ++it;
  }
  const uint64_t page_rows = std::max<uint64_t>(tail_page_rows_, size);
  std::set<std::string> continued;  // groups whose page re-reads the last member
  while (!pending.empty()) {
    std::vector<Referrer> loaded;
    DENORMD_RETURN_IF_ERROR(
        txn->FindReferrersAround(projection.buckets, relation, pending, page_rows, &loaded));
    std::map<std::string, StoreTransaction::ReferrerBound> next_pending;
    std::map<std::string, TailPage> pages =
        SplitTailPage(loaded, pending, continued, page_rows, &next_pending);

    // Plan the page: the stored buckets and the entities it needs, read for
    // every group at once.
    std::vector<std::string> document_ids;
    std::vector<EntityKey> entity_keys;
    for (const auto& entry : pending) {
      const std::string& group = entry.first;
      const BucketBound& bound = bounds.at(group);
      TailSplice& splice = splices[group];
      splice.page = std::move(pages[group]);
      const std::vector<const Referrer*>& members = splice.page.members;
      if (!splice.started) {
        // The tail starts at its first member (before the bound when the
        // bound's bucket has earlier members) or at the bound.
        std::pair<std::string, std::string> start{bound.sort, bound.id};
        if (!members.empty()) {
          start = std::min(start, std::make_pair(members.front()->sort,
                                                 members.front()->entity.key.id));
        }
        splice.old_keys.erase(
            splice.old_keys.begin(),
            std::lower_bound(splice.old_keys.begin(), splice.old_keys.end(), start));
        splice.started = true;
      }
      // Stored items this page takes: one per unchanged member, one per old
      // key passed; and every stored bucket this page may overwrite must be
      // read before it is.
      uint64_t needed = 0;
      for (const Referrer* m : members) {
        if (bound.fresh_ids.count(m->entity.key.id)) {
          entity_keys.push_back(m->entity.key);
        } else if (++needed == 1 && !splice.sampled) {
          entity_keys.push_back(m->entity.key);  // the sample
        }
      }
      size_t keys_passed = splice.old_keys.size();
      if (splice.page.more && !members.empty()) {
        keys_passed = std::upper_bound(splice.old_keys.begin(), splice.old_keys.end(),
                                       std::make_pair(members.back()->sort,
                                                      members.back()->entity.key.id)) -
                      splice.old_keys.begin();
      }
      needed += keys_passed - std::min(keys_passed, splice.next_old_key);
      uint64_t emitted_to = (*next_bucket)[group] +
                            (splice.pool.size() + members.size() + size - 1) / size;
      uint64_t available = splice.old_items.size();
      splice.read_to = splice.next_old;
      while (splice.read_to < splice.old_buckets &&
             (available < needed || splice.read_to < emitted_to)) {
        available += splice.StoredItems(splice.read_to, size);
        document_ids.push_back(group + ":" + std::to_string(splice.read_to));
        ++splice.read_to;
      }
    }
    std::vector<DocumentRow> stored;
    if (!document_ids.empty()) {
      DENORMD_RETURN_IF_ERROR(
          txn->LoadDocuments(projection.collection, projection.name, document_ids, &stored));
    }
    std::map<std::string, const DocumentRow*> stored_by_id;
    for (const DocumentRow& row : stored) stored_by_id[row.id] = &row;
    std::vector<EntityRecord> records;
    if (!entity_keys.empty()) DENORMD_RETURN_IF_ERROR(txn->LoadEntities(entity_keys, &records));
    std::map<std::string, const EntityRecord*> entities;
    for (const EntityRecord& record : records) {
      if (!record.deleted && record.data) entities[record.key.id] = &record;
    }

    std::vector<DocumentRow> rows;
    for (const auto& entry : pending) {
      const std::string& group = entry.first;
      const BucketBound& bound = bounds.at(group);
      TailSplice& splice = splices[group];
      bool consistent = true;
      // The stored buckets read for this page, each checked for its size.
      for (; consistent && splice.next_old < splice.read_to; ++splice.next_old) {
        auto found = stored_by_id.find(group + ":" + std::to_string(splice.next_old));
        std::vector<std::string> items;
        consistent = found != stored_by_id.end() &&
                     SplitArrayField(found->second->json, projection.field, &items) &&
                     items.size() == splice.StoredItems(splice.next_old, size);
        for (std::string& item : items) splice.old_items.push_back(std::move(item));
      }
      for (size_t i = 0; consistent && i < splice.page.members.size(); ++i) {
        const Referrer* m = splice.page.members[i];
        const std::pair<std::string, std::string> key{m->sort, m->entity.key.id};
        consistent = splice.DropOldItemsThrough(&key);
        std::string item;
        if (bound.fresh_ids.count(m->entity.key.id)) {
          auto entity = entities.find(m->entity.key.id);
          consistent = consistent && entity != entities.end();
          if (consistent) item = RenderItem(projection, *entity->second);
        } else {
          consistent = consistent && splice.TakeOldItem(&item);
          if (consistent && !splice.sampled) {
            // A changed `select` (or an edited document) shows here: the
            // stored item must be what the member renders to now.
            auto entity = entities.find(m->entity.key.id);
            JsonDocument stored_item, rendered_item;
            consistent = entity != entities.end() && ParseJson(item, &stored_item).ok() &&
                         ParseJson(RenderItem(projection, *entity->second), &rendered_item).ok() &&
                         JsonEquals(stored_item, rendered_item);
            splice.sampled = true;
          }
        }
        if (consistent) splice.pool.push_back(std::move(item));
      }
      if (consistent && !splice.page.more) {
        // The tail's end: the old keys left are members that left it, and
        // every stored item and bucket has been taken.
        consistent = splice.DropOldItemsThrough(nullptr) && splice.old_items.empty() &&
                     splice.next_old == splice.old_buckets;
      }
      if (!consistent) {
        unspliced->insert(group);
        next_pending.erase(group);
        continue;
      }
      size_t complete = splice.page.more ? splice.pool.size() / size * size : splice.pool.size();
      AppendBuckets(projection, group, (*next_bucket)[group], splice.pool, complete, &rows);
      (*next_bucket)[group] += (complete + size - 1) / size;
      splice.pool.erase(splice.pool.begin(), splice.pool.begin() + complete);
    }
    if (!rows.empty()) DENORMD_RETURN_IF_ERROR(emit(&rows));
    continued.clear();
    for (const auto& entry : next_pending) continued.insert(entry.first);
    pending = std::move(next_pending);
  }
  return Status::Ok();
}

Status DocumentBuilder::RenderBucketTails(
    StoreTransaction* txn, const ProjectionConfig& projection,
    std::map<std::string, StoreTransaction::ReferrerBound> pending,
    std::map<std::string, uint64_t>* next_bucket,
    const std::function<Status(std::vector<DocumentRow>* rows)>& emit) const {
  const std::string relation = BucketRelation(projection);
  // Read the tails in pages, so that memory stays bounded when a change near
  // the start of a large group shifts every later bucket. A page's last
  // member is re-read as the (inclusive) bound of the next page.
  const uint64_t page = std::max<uint64_t>(tail_page_rows_, projection.size);
  std::map<std::string, std::vector<Referrer>> carry;  // members of an unfinished bucket
  std::set<std::string> continued;
  while (!pending.empty()) {
    std::vector<Referrer> loaded;
    DENORMD_RETURN_IF_ERROR(
        txn->LoadReferrersAround(projection.buckets, relation, pending, page, &loaded));
    std::map<std::string, StoreTransaction::ReferrerBound> next_pending;
    std::map<std::string, TailPage> pages =
        SplitTailPage(loaded, pending, continued, page, &next_pending);
    std::vector<DocumentRow> rows;
    for (const auto& entry : pages) {
      const std::string& group = entry.first;
      bool more = entry.second.more;
      std::vector<Referrer>& pool = carry[group];
      for (const Referrer* member : entry.second.members) pool.push_back(*member);
      size_t complete = more ? pool.size() / projection.size * projection.size : pool.size();
      std::vector<const Referrer*> done;
      for (size_t i = 0; i < complete; ++i) done.push_back(&pool[i]);
      AppendMemberBuckets(projection, group, (*next_bucket)[group], done, &rows);
      (*next_bucket)[group] += (complete + projection.size - 1) / projection.size;
      pool.erase(pool.begin(), pool.begin() + complete);
    }
    if (!rows.empty()) DENORMD_RETURN_IF_ERROR(emit(&rows));
    continued.clear();
    for (const auto& entry : next_pending) continued.insert(entry.first);
    pending = std::move(next_pending);
  }
  return Status::Ok();
}

Status DocumentBuilder::BuildPointBuckets(
    StoreTransaction* txn, size_t projection_index,
    const std::map<std::string, BucketBound>& bounds, std::map<std::string, uint64_t>& total,
    const std::function<Status(std::vector<DocumentRow>* rows)>& emit) const {
  const ProjectionConfig& projection = plan_.config().projections[projection_index];
  const std::string relation = BucketRelation(projection);
  // Points a tail does not cover, per group, in order.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> points;
  for (const auto& bound : bounds) {
    for (const auto& point : bound.second.points) {
      if (bound.second.has_tail &&
          std::tie(point.first, point.second) >= std::tie(bound.second.sort, bound.second.id)) {
        continue;
      }
      points[bound.first].push_back(point);
    }
    std::sort(points[bound.first].begin(), points[bound.first].end());
  }
  // Round k rewrites the bucket of each group's k-th point (skipping points
  // whose bucket an earlier round already wrote).
  std::map<std::string, std::set<uint64_t>> written;
  for (size_t k = 0;; ++k) {
    std::map<std::string, StoreTransaction::ReferrerBound> round;
    for (const auto& entry : points) {
      if (k < entry.second.size()) {
        round[entry.first] = {entry.second[k].first, entry.second[k].second, 0};
      }
    }
    if (round.empty()) return Status::Ok();
    std::map<std::string, uint64_t> from;
    DENORMD_RETURN_IF_ERROR(txn->CountReferrersFrom(projection.buckets, relation, round, &from));
    std::map<std::string, uint64_t> bucket_of;
    for (auto it = round.begin(); it != round.end();) {
      uint64_t rank = total[it->first] - std::min(total[it->first], from[it->first]);
      uint64_t bucket = rank / projection.size;
      if (!written[it->first].insert(bucket).second) {
        it = round.erase(it);
        continue;
      }
      bucket_of[it->first] = bucket;
      it->second.before = rank - bucket * projection.size;
      ++it;
    }
    std::vector<Referrer> loaded;
    DENORMD_RETURN_IF_ERROR(txn->LoadReferrersAround(projection.buckets, relation, round,
                                                     projection.size, &loaded));
    std::map<std::string, std::vector<const Referrer*>> by_group;
    for (const Referrer& member : loaded) by_group[member.target].push_back(&member);
    std::vector<DocumentRow> rows;
    for (const auto& entry : round) {
      std::vector<const Referrer*>& members = by_group[entry.first];
      SortReferrers(&members);
      if (members.size() > projection.size) members.resize(projection.size);
      AppendMemberBuckets(projection, entry.first, bucket_of[entry.first], members, &rows);
    }
    if (!rows.empty()) DENORMD_RETURN_IF_ERROR(emit(&rows));
  }
}

}  // namespace denormd
