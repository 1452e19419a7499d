#include "projections/memory_bucket_tables.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "projections/json.h"
#include "projections/memory_work.h"

namespace denormd {

Status MemoryBucketTables::ProbeBuckets(
    const ProjectionConfig& projection,
    const std::vector<std::pair<std::string, IndexKey>>& probes, std::vector<BucketSlot>* out) {
  MemoryState& state = work_.state();
  for (size_t i = 0; i < probes.size(); ++i) {
    std::vector<BucketSlot> group;  // by lo
    for (const auto& entry : state.collections[projection.collection]) {
      const MemoryState::Document& doc = entry.second;
      if (doc.projection != projection.name || doc.pk != probes[i].first || !doc.bucket ||
          !doc.bucket->lo) {
        continue;
      }
      group.push_back({i, !(probes[i].second < *doc.bucket->lo), entry.first, *doc.bucket});
    }
    std::sort(group.begin(), group.end(), [](const BucketSlot& a, const BucketSlot& b) {
      return *a.meta.lo < *b.meta.lo;
    });
    size_t split = 0;
    while (split < group.size() && group[split].below) ++split;
    for (size_t k = split >= kProbeWindow ? split - kProbeWindow : 0;
         k < std::min(group.size(), split + kProbeWindow); ++k) {
      out->push_back(group[k]);
    }
  }
  return Status::Ok();
}

Status MemoryBucketTables::MaxBucketNumbers(const ProjectionConfig& projection,
                                            const std::vector<std::string>& groups,
                                            std::map<std::string, uint64_t>* out) {
  MemoryState& state = work_.state();
  std::set<std::string> wanted(groups.begin(), groups.end());
  for (const auto& entry : state.collections[projection.collection]) {
    const MemoryState::Document& doc = entry.second;
    if (doc.projection != projection.name || !doc.pk || !wanted.count(*doc.pk) || !doc.bucket) {
      continue;
    }
    auto inserted = out->emplace(*doc.pk, doc.bucket->number);
    if (!inserted.second) {
      inserted.first->second = std::max(inserted.first->second, doc.bucket->number);
    }
  }
  return Status::Ok();
}

Status MemoryBucketTables::RespaceBuckets(const ProjectionConfig& projection,
                                          const std::string& group, int64_t after, int64_t before,
                                          int64_t step, uint64_t* written) {
  MemoryState& state = work_.state();
  // (lo, id, document) of the group's buckets below `before` and above `after`.
  std::vector<std::tuple<IndexKey, std::string, MemoryState::Document*>> head, tail;
  for (auto& entry : state.collections[projection.collection]) {
    MemoryState::Document& doc = entry.second;
    if (doc.projection == projection.name && doc.pk == group && doc.bucket && doc.bucket->lo) {
      if (doc.bucket->seq < before) head.emplace_back(*doc.bucket->lo, entry.first, &doc);
      if (doc.bucket->seq > after) tail.emplace_back(*doc.bucket->lo, entry.first, &doc);
    }
  }
  const bool use_head = head.size() < tail.size();
  auto& buckets = use_head ? head : tail;
  const int64_t first = use_head ? before - static_cast<int64_t>(head.size()) * step : after + step;
  std::sort(buckets.begin(), buckets.end(),
            [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
  auto& docs = state.collections[projection.collection];
  work_.Remember(&state.document_writes, projection.collection);
  for (auto& entry : docs) {
    if (entry.second.pk == group) work_.Remember(&docs, entry.first);
  }
  for (size_t rank = 0; rank < buckets.size(); ++rank) {
    MemoryState::Document& doc = *std::get<2>(buckets[rank]);
    doc.bucket->seq = first + static_cast<int64_t>(rank) * step;
    JsonDocument json;
    if (!ParseJson(doc.json, &json).ok()) return Status::Fatal("a stored bucket is not JSON");
    json["seq"].SetInt64(doc.bucket->seq);
    doc.json = ToJson(json);
    work_.Capture(projection.collection, std::get<1>(buckets[rank]), doc.pk, doc.json);
    ++*written;
    ++state.document_writes[projection.collection];
  }
  return Status::Ok();
}

}  // namespace denormd
