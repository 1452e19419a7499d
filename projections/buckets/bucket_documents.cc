#include "projections/buckets/bucket_documents.h"

#include <algorithm>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "projections/buckets/bucket_tables.h"
#include "projections/selection.h"

namespace denormd {

std::string BucketDocumentId(const std::string& group, uint64_t number) {
  return group + ":" + std::to_string(number);
}

std::string RenderItem(const ProjectionConfig& projection, const EntityRecord& member) {
  JsonDocument scratch;
  JsonValue item;
  ApplySelection(projection.select, member.key.id, *member.data, &item, scratch.GetAllocator());
  return ToJson(item);
}

DocumentRow BucketDocument(const ProjectionConfig& projection, const std::string& group,
                           BucketMeta meta, const std::vector<std::string>& items, size_t begin,
                           size_t end) {
  const std::string id = BucketDocumentId(group, meta.number);
  meta.members = end - begin;
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("id");
  w.String(id.data(), static_cast<rapidjson::SizeType>(id.size()));
  w.Key(projection.by.text.data(), static_cast<rapidjson::SizeType>(projection.by.text.size()));
  w.String(group.data(), static_cast<rapidjson::SizeType>(group.size()));
  w.Key("seq");
  w.Int64(meta.seq);
  w.Key(projection.field.data(), static_cast<rapidjson::SizeType>(projection.field.size()));
  w.StartArray();
  for (size_t i = begin; i < end; ++i) {
    w.RawValue(items[i].data(), items[i].size(), rapidjson::kObjectType);
  }
  w.EndArray();
  w.EndObject();
  return {id, group, std::string(buffer.GetString(), buffer.GetSize()), meta};
}

void AppendPackedBuckets(const ProjectionConfig& projection, const std::string& group,
                         uint64_t first, const std::vector<std::string>& items, size_t count,
                         std::vector<DocumentRow>* rows) {
  for (size_t start = 0, n = first; start < count; start += projection.size, ++n) {
    BucketMeta meta;
    meta.number = n;
    meta.seq = static_cast<int64_t>(n);
    rows->push_back(BucketDocument(projection, group, meta, items, start,
                                   std::min<size_t>(count, start + projection.size)));
  }
}

void AppendPackedMemberBuckets(const ProjectionConfig& projection, const std::string& group,
                               uint64_t first, const std::vector<const Referrer*>& members,
                               std::vector<DocumentRow>* rows) {
  std::vector<std::string> items;
  items.reserve(members.size());
  for (const Referrer* member : members) items.push_back(RenderItem(projection, member->entity));
  const size_t before = rows->size();
  AppendPackedBuckets(projection, group, first, items, items.size(), rows);
  for (size_t i = before, start = 0; i < rows->size(); ++i, start += projection.size) {
    BucketMeta& meta = *(*rows)[i].bucket;
    meta.lo = members[start]->key();
    if (projection.layout != ProjectionConfig::BucketLayout::kStable) continue;  // read by its splice only
    std::vector<IndexKey> keys;
    for (size_t m = start; m < start + meta.members; ++m) keys.push_back(members[m]->key());
    meta.member_keys = PackIndexKeys(keys);
  }
}

bool BucketItemsReadable(const ProjectionConfig& projection) {
  return !(projection.field == "id" || projection.field == "seq" || projection.by.text == "id" ||
           projection.by.text == "seq" || projection.field == projection.by.text ||
           NeedsJsonEscaping(projection.field));
}

}  // namespace denormd
