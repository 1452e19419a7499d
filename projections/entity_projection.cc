#include "projections/entity_projection.h"

#include <algorithm>

#include "projections/selection.h"

namespace denormd {

namespace {

constexpr size_t kUnitsPerChunk = 1000;

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::optional<std::string> PartitionKeyOf(const std::string& partition_key, const JsonValue& doc) {
  if (partition_key.empty()) return std::nullopt;
  auto it = doc.FindMember(JsonValue(rapidjson::StringRef(partition_key.data(),
                                                          partition_key.size())));
  if (it == doc.MemberEnd() || it->value.IsNull()) return std::nullopt;
  if (it->value.IsString()) return std::string(it->value.GetString(), it->value.GetStringLength());
  return ToJson(it->value);
}

}  // namespace

EntityProjection::EntityProjection(const ProjectionConfig& config, size_t index,
                                   std::vector<Field> fields)
    : Projection(config, index), fields_(std::move(fields)) {}

void EntityProjection::CollectAffected(const EntityChange& change, AffectedUnits* out) const {
  out->AddUnit(index(), change.key.id);
}

std::string EntityProjection::LockKey(const std::string& unit) const {
  return EntityLockKey(config().from, unit);
}

Status EntityProjection::Build(StoreTransaction& txn, const std::vector<std::string>& ids,
                               const RelationMoves* moves, std::vector<DocumentRow>* out) const {
  std::vector<EntityKey> keys;
  for (const std::string& id : ids) keys.push_back({config().from, id});
  std::vector<EntityRecord> records;
  DENORMD_RETURN_IF_ERROR(txn.source().LoadEntities(keys, &records));
  std::vector<const EntityRecord*> roots;
  for (const EntityRecord& record : records) {
    if (record.live()) roots.push_back(&record);
  }
  if (roots.empty()) return Status::Ok();
  std::vector<std::unique_ptr<DerivationReads>> reads(fields_.size());
  for (size_t f = 0; f < fields_.size(); ++f) {
    const Derivation& derivation = *fields_[f].second;
    DENORMD_RETURN_IF_ERROR(moves ? derivation.ReadInBatch(txn, roots, *moves, &reads[f])
                                  : derivation.Read(txn, roots, &reads[f]));
  }
  for (const EntityRecord* root : roots) {
    out->push_back(Render(*root, [&](size_t f, JsonValue* value, JsonAllocator& allocator) {
      return fields_[f].second->Render(*root, reads[f].get(), value, allocator);
    }));
  }
  return Status::Ok();
}

DocumentRow EntityProjection::Render(const EntityRecord& root, const FieldValue& field_value) const {
  const ProjectionConfig& projection = config();
  JsonDocument doc(rapidjson::kObjectType);
  JsonAllocator& allocator = doc.GetAllocator();
  for (auto it = root.data->MemberBegin(); it != root.data->MemberEnd(); ++it) {
    std::string name(it->name.GetString(), it->name.GetStringLength());
    bool derived = std::any_of(fields_.begin(), fields_.end(),
                               [&](const Field& field) { return field.first == name; });
    if (name == "id" || derived) continue;
    if (projection.has_include && !Contains(projection.include, name)) continue;
    if (Contains(projection.exclude, name)) continue;
    JsonValue value(it->value, allocator);
    AddMember(&doc, name, value, allocator);
  }
  JsonValue id_value(root.key.id.data(), static_cast<rapidjson::SizeType>(root.key.id.size()),
                     allocator);
  AddMember(&doc, "id", id_value, allocator);
  for (size_t f = 0; f < fields_.size(); ++f) {
    JsonValue value;
    if (field_value(f, &value, allocator)) {
      AddMember(&doc, fields_[f].first, value, allocator);
    }
  }
  DocumentRow row;
  row.id = root.key.id;
  row.pk = PartitionKeyOf(projection.partition_key, doc);
  row.json = ToJson(doc);
  return row;
}

void EntityProjection::ReadAhead(StoreTransaction& txn, const std::set<std::string>& units,
                                 const GroupChanges* /*changes: bucket projections only*/) const {
  if (units.empty() || units.size() > kUnitsPerChunk) return;
  std::vector<EntityKey> keys;
  std::vector<std::string> ids(units.begin(), units.end());
  for (const std::string& id : ids) keys.push_back({config().from, id});
  txn.source().ReadAhead(keys);
  for (const Field& field : fields_) field.second->ReadAhead(txn, ids);
}

Status EntityProjection::Recompute(StoreTransaction& txn, const std::set<std::string>& units,
                                   const GroupChanges* changes, const RelationMoves* moves,
                                   BatchStats* stats) const {
  (void)changes;  // an entity projection has no groups
  std::vector<std::string> all(units.begin(), units.end());
  for (size_t start = 0; start < all.size(); start += kUnitsPerChunk) {
    std::vector<std::string> chunk(all.begin() + start,
                                   all.begin() + std::min(all.size(), start + kUnitsPerChunk));
    std::vector<DocumentRow> built;
    DENORMD_RETURN_IF_ERROR(Build(txn, chunk, moves, &built));
    stats->units_recomputed += chunk.size();
    std::set<std::string> present;
    for (const DocumentRow& row : built) present.insert(row.id);
    std::vector<std::string> gone;
    for (const std::string& id : chunk) {
      if (!present.count(id)) gone.push_back(id);
    }
    if (!built.empty()) {
      DENORMD_RETURN_IF_ERROR(txn.documents().Upsert(config(), built, &stats->documents_written));
    }
    if (!gone.empty()) {
      DENORMD_RETURN_IF_ERROR(txn.documents().Delete(config(), gone, &stats->documents_deleted));
    }
  }
  return Status::Ok();
}

Status EntityProjection::VerifyFromSource(StoreTransaction& txn, SourceView& source,
                                          const std::vector<std::string>& units,
                                          std::vector<std::string>* differences) const {
  return source.ForEachChunk(units, [&](const std::vector<std::string>& chunk) {
    std::vector<DocumentRow> expected, stored;
    DENORMD_RETURN_IF_ERROR(source.Gather([&] {
      expected.clear();
      for (const EntityRecord* root : source.Entities(config().from, chunk)) {
        expected.push_back(Render(*root, [&](size_t f, JsonValue* value, JsonAllocator& allocator) {
          return fields_[f].second->Define(*root, source, value, allocator);
        }));
      }
      return Status::Ok();
    }));
    DENORMD_RETURN_IF_ERROR(txn.documents().Load(config(), chunk, &stored));
    CompareDocuments(std::move(expected), stored, differences);
    return Status::Ok();
  });
}

Status EntityProjection::ListDefinedUnits(StoreTransaction& txn, SourceView& /*source*/,
                                          std::vector<std::string>* out) const {
  // Every stored row of the root type (a tombstone's unit then expects no
  // document).
  std::string after;
  while (true) {
    std::vector<std::string> ids;
    DENORMD_RETURN_IF_ERROR(txn.source().ListEntityIds(config().from, after, kUnitsPerChunk, &ids));
    if (ids.empty()) return Status::Ok();
    after = ids.back();
    out->insert(out->end(), ids.begin(), ids.end());
  }
}

Status EntityProjection::ListSourceUnits(StoreTransaction& txn, const std::string& after,
                                         size_t limit, std::vector<std::string>* out) const {
  return txn.source().ListEntityIds(config().from, after, limit, out);
}

Status EntityProjection::ListStoredUnits(StoreTransaction& txn, const std::string& after,
                                         size_t limit, std::vector<std::string>* out) const {
  return txn.documents().ListKeys(config(), /*by_pk=*/false, after, limit, out);
}

}  // namespace denormd
