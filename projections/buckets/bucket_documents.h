// The bucket document format, shared by the layouts:
//   {"id": "<group>:<n>", "<by>": "<group>", "seq": <integer>, "<field>": [items]}
// where an item is a member as the projection's `select` shows it.
#ifndef DENORMD_PROJECTIONS_BUCKETS_BUCKET_DOCUMENTS_H_
#define DENORMD_PROJECTIONS_BUCKETS_BUCKET_DOCUMENTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "projections/entity.h"
#include "projections/store.h"

namespace denormd {

// "<group>:<number>".
std::string BucketDocumentId(const std::string& group, uint64_t number);

// A member as its bucket shows it: the projection's selection, as JSON text.
std::string RenderItem(const ProjectionConfig& projection, const EntityRecord& member);

// One bucket document holding items [begin, end); `meta` says where it sits
// (meta.members is set from the items).
DocumentRow BucketDocument(const ProjectionConfig& projection, const std::string& group,
                           BucketMeta meta, const std::vector<std::string>& items, size_t begin,
                           size_t end);

// Packed bucket documents number `first`, `first`+1, ... (seq = number) of
// `group`, from the first `count` items, `size` a document.
void AppendPackedBuckets(const ProjectionConfig& projection, const std::string& group,
                         uint64_t first, const std::vector<std::string>& items, size_t count,
                         std::vector<DocumentRow>* rows);

// The same from members, each rendered with RenderItem; each document's
// metadata also holds its first member's key (`lo`) and, in the stable
// layout, all its members' keys.
void AppendPackedMemberBuckets(const ProjectionConfig& projection, const std::string& group,
                               uint64_t first, const std::vector<const Referrer*>& members,
                               std::vector<DocumentRow>* rows);

// Whether stored items can be matched with members by position: a document
// whose keys collide, or whose items field needs escaping (which
// SplitArrayField does not read), cannot be read back unambiguously.
bool BucketItemsReadable(const ProjectionConfig& projection);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_BUCKETS_BUCKET_DOCUMENTS_H_
