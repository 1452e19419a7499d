#include "projections/memory_document_tables.h"

#include <set>

#include "projections/json.h"
#include "projections/memory_work.h"

namespace denormd {

namespace {

// The key of a document in its collection's map: its id, or "<pk>\x1f<id>"
// in a shared collection.
std::string DocumentKey(const ProjectionConfig& projection, const std::string& id,
                        const std::optional<std::string>& pk) {
  return projection.shared_collection ? pk.value_or("") + '\x1f' + id : id;
}

bool SameMeta(const std::optional<BucketMeta>& a, const std::optional<BucketMeta>& b) {
  if (!a || !b) return !a && !b;
  return a->number == b->number && a->seq == b->seq && a->lo == b->lo &&
         a->members == b->members && a->member_keys == b->member_keys;
}

bool SameJson(const std::string& a, const std::string& b) {
  if (a == b) return true;
  JsonDocument x, y;
  return ParseJson(a, &x).ok() && ParseJson(b, &y).ok() && JsonEquals(x, y);
}

}  // namespace

Status MemoryDocumentTables::Upsert(const ProjectionConfig& projection,
                                    const std::vector<DocumentRow>& rows, uint64_t* written) {
  MemoryState& state = work_.state();
  auto& docs = state.collections[projection.collection];
  for (const DocumentRow& row : rows) {
    MemoryState::Document doc{projection.name, row.pk, row.json, row.bucket, row.id};
    const std::string key = DocumentKey(projection, row.id, row.pk);
    auto it = docs.find(key);
    if (it != docs.end() && it->second.projection != doc.projection) {
      return Status::InvalidInput("collection " + projection.collection + ": a document of " +
                                  projection.name + " has the key of document " + row.id +
                                  " (partition " + row.pk.value_or("none") + ") of projection " +
                                  it->second.projection +
                                  " (documents of a shared collection need unique (partition "
                                  "key, id) pairs)");
    }
    if (it != docs.end() && it->second.pk == doc.pk && SameMeta(it->second.bucket, doc.bucket) &&
        SameJson(it->second.json, doc.json)) {
      continue;
    }
    // An entity document whose partition key changed moves to its new key
    // (in the outbox: deleted under the old pk).
    auto old = Find(projection, row.id);
    if (old != docs.end() && old->second.pk != doc.pk) {
      work_.Capture(projection.collection, row.id, old->second.pk, std::nullopt);
    }
    if (old != docs.end() && old->first != key) {
      work_.Remember(&docs, old->first);
      docs.erase(old);
    }
    work_.Capture(projection.collection, row.id, doc.pk, doc.json);
    work_.Remember(&docs, key);
    work_.Remember(&state.document_writes, projection.collection);
    docs[key] = doc;
    ++*written;
    ++state.document_writes[projection.collection];
  }
  return Status::Ok();
}

Status MemoryDocumentTables::Delete(const ProjectionConfig& projection,
                                    const std::vector<std::string>& ids, uint64_t* deleted) {
  MemoryState& state = work_.state();
  auto& docs = state.collections[projection.collection];
  for (const std::string& id : ids) {
    auto it = Find(projection, id);
    if (it != docs.end()) Erase(projection, it, it->second.id, deleted);
  }
  return Status::Ok();
}

Status MemoryDocumentTables::DeleteByPkExcept(const ProjectionConfig& projection,
                                              const std::vector<std::string>& pks,
                                              const std::vector<std::string>& keep,
                                              uint64_t* deleted) {
  MemoryState& state = work_.state();
  std::set<std::string> kept(keep.begin(), keep.end());
  std::set<std::string> groups(pks.begin(), pks.end());
  auto& docs = state.collections[projection.collection];
  for (auto it = docs.begin(); it != docs.end();) {
    if (it->second.projection == projection.name && it->second.pk &&
        groups.count(*it->second.pk) && !kept.count(it->first)) {
      it = Erase(projection, it, it->first, deleted);
    } else {
      ++it;
    }
  }
  return Status::Ok();
}

Status MemoryDocumentTables::Load(const ProjectionConfig& projection,
                                  const std::vector<std::string>& ids,
                                  std::vector<DocumentRow>* out) {
  MemoryState& state = work_.state();
  auto& docs = state.collections[projection.collection];
  for (const std::string& id : ids) {
    auto it = Find(projection, id);
    if (it != docs.end()) out->push_back({id, it->second.pk, it->second.json, it->second.bucket});
  }
  return Status::Ok();
}

Status MemoryDocumentTables::LoadByPk(const ProjectionConfig& projection,
                                      const std::vector<std::string>& pks,
                                      std::vector<DocumentRow>* out) {
  MemoryState& state = work_.state();
  std::set<std::string> wanted(pks.begin(), pks.end());
  for (const auto& entry : state.collections[projection.collection]) {
    const MemoryState::Document& doc = entry.second;
    if (doc.projection == projection.name && doc.pk && wanted.count(*doc.pk)) {
      out->push_back({doc.id, doc.pk, doc.json, doc.bucket});
    }
  }
  return Status::Ok();
}

Status MemoryDocumentTables::ListKeys(const ProjectionConfig& projection, bool by_pk,
                                      const std::string& after, size_t limit,
                                      std::vector<std::string>* out) {
  MemoryState& state = work_.state();
  std::set<std::string> keys;
  for (const auto& entry : state.collections[projection.collection]) {
    if (entry.second.projection != projection.name) continue;
    const std::string* key = by_pk ? (entry.second.pk ? &*entry.second.pk : nullptr)
                                   : &entry.second.id;
    if (key != nullptr && *key > after) keys.insert(*key);
  }
  for (const std::string& key : keys) {
    if (out->size() >= limit) break;
    out->push_back(key);
  }
  return Status::Ok();
}

MemoryDocumentTables::DocumentIt MemoryDocumentTables::Find(const ProjectionConfig& projection,
                                                            const std::string& id) {
  MemoryState& state = work_.state();
  auto& docs = state.collections[projection.collection];
  if (!projection.shared_collection) {
    auto it = docs.find(id);
    return it != docs.end() && it->second.projection == projection.name ? it : docs.end();
  }
  for (auto it = docs.begin(); it != docs.end(); ++it) {
    if (it->second.id == id && it->second.projection == projection.name) return it;
  }
  return docs.end();
}

MemoryDocumentTables::DocumentIt MemoryDocumentTables::Erase(const ProjectionConfig& projection,
                                                             DocumentIt it, const std::string& id,
                                                             uint64_t* deleted) {
  MemoryState& state = work_.state();
  auto& docs = state.collections[projection.collection];
  work_.Remember(&docs, it->first);
  work_.Remember(&state.document_writes, projection.collection);
  work_.Capture(projection.collection, id, it->second.pk, std::nullopt);
  ++*deleted;
  ++state.document_writes[projection.collection];
  return docs.erase(it);
}

}  // namespace denormd
