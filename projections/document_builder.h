// DocumentBuilder: computes projection documents from the source state.
//
// A document is a pure function of the committed source: its root entity and
// the entities one relation away. The builder computes the documents of many
// units of one projection at once with set-based reads (one store call per
// relation, not per document), which is what lets a batch or a rebuild touch
// thousands of documents cheaply.
//
// A unit is what is recomputed as a whole: for an entity projection, the
// document of one root id; for a bucket projection, all bucket documents of one
// group value.
#ifndef DENORMD_PROJECTIONS_DOCUMENT_BUILDER_H_
#define DENORMD_PROJECTIONS_DOCUMENT_BUILDER_H_

#include <functional>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "projections/projection_plan.h"
#include "projections/store.h"

namespace denormd {

// The smallest (sort key, id) among the members of a bucket group that a
// batch changed, before or after: buckets wholly before it are unchanged.
//
// `points` are members changed in place (same group, same sort key: only what
// their bucket shows changed); a point before the bound, or any point when
// there is no bound (`has_tail` false), rewrites just its own bucket.
//
// `old_keys` and `fresh_ids` let a tail be spliced from the stored buckets
// instead of re-rendered from every member: `old_keys` are the (sort, id) the
// batch's changed members had in this group before it (points included),
// `fresh_ids` the changed members in the group now (points included), whose
// items are rendered from their entities. Every other member of the tail
// keeps its stored item.
struct BucketBound {
  bool has_tail = true;
  std::string sort;
  std::string id;
  std::vector<std::pair<std::string, std::string>> points;  // (sort, id)
  std::vector<std::pair<std::string, std::string>> old_keys;
  std::set<std::string> fresh_ids;
};

// The ids a reference field names: the string, or the string elements of the
// array, at `path` in `data` (sorted, unique). Empty when absent.
std::vector<std::string> ReferenceTargets(const Path& path, const std::string& id,
                                          const JsonValue& data);

// The reference-index rows of an entity of `type` (none for a tombstone).
std::vector<ReferenceRow> ReferenceRowsOf(const ProjectionPlan& plan, const EntityRecord& record);

// The ids an entity names in a relation.
std::vector<std::string> RelationTargets(const Relation& relation, const std::string& id,
                                         const JsonValue& data);

// The string at `path` (nullopt when absent or not a string): a bucket group.
std::optional<std::string> StringAt(const Path& path, const std::string& id,
                                    const JsonValue& data);

// An entity's sort key (OrderKey) for `order`; "" when there is no order
// (null or not present), i.e. ordered by id.
std::string SortKey(const OrderBy* order, const std::string& id, const JsonValue& data);

// What a relation copies from one related entity (select applied), as JSON.
void ApplySelection(const Selection& selection, const std::string& id, const JsonValue& data,
                    JsonValue* out, JsonAllocator& allocator);

class DocumentBuilder {
 public:
  // `tail_page_rows`: members read per group and page when rebuilding bucket
  // tails (small values exercise paging in tests).
  explicit DocumentBuilder(const ProjectionPlan& plan, uint64_t tail_page_rows = 2000)
      : plan_(plan), tail_page_rows_(tail_page_rows) {}

  // Computes the documents of `units` of projection `projection`. For each
  // unit, (*out)[unit] holds its documents: none when the root is gone (entity
  // projections) or the group is empty (bucket projections).
  Status Build(StoreTransaction* txn, size_t projection, const std::vector<std::string>& units,
               std::map<std::string, std::vector<DocumentRow>>* out) const;

  // Incremental buckets: for each group, its documents from the bucket
  // holding its bound on, in pages handed to `emit` (which may consume the
  // rows). Earlier buckets are unchanged by definition of the bound. The
  // members from there on are read by key, their items taken from the stored
  // buckets they shift out of, and only the batch's changed members rendered
  // from their entities; a group whose stored buckets do not fit is rendered
  // whole from its entities and counted in *rendered. The stored buckets are
  // trusted to be this projection's output before the batch (denormd owns
  // them; `verify` finds, and `rebuild` repairs, edits made behind its back).
  // *keep receives the ids of every document each group has now; others of
  // these groups are to be deleted.
  Status BuildBucketTails(StoreTransaction* txn, size_t projection,
                          const std::map<std::string, BucketBound>& bounds,
                          const std::function<Status(std::vector<DocumentRow>* rows)>& emit,
                          std::vector<std::string>* keep, uint64_t* rendered) const;


 private:
  Status BuildEntityDocuments(StoreTransaction* txn, const ProjectionConfig& projection,
                              const std::vector<std::string>& ids,
                              std::map<std::string, std::vector<DocumentRow>>* out) const;
  Status BuildBucketDocuments(StoreTransaction* txn, const ProjectionConfig& projection,
                              const std::vector<std::string>& groups,
                              std::map<std::string, std::vector<DocumentRow>>* out) const;

  // Tails spliced from the stored buckets (see BucketBound): only the
  // batch's changed members are rendered. A group whose stored buckets do not
  // fit (a missing bucket, a wrong number of items, an item that differs from
  // what its member renders to now) is left to RenderBucketTails, in
  // *unspliced. *next_bucket: per group, the next bucket number to write.
  Status SpliceBucketTails(StoreTransaction* txn, const ProjectionConfig& projection,
                           const std::map<std::string, BucketBound>& bounds,
                           std::map<std::string, uint64_t>& total,
                           std::map<std::string, StoreTransaction::ReferrerBound> pending,
                           std::map<std::string, uint64_t>* next_bucket,
                           const std::function<Status(std::vector<DocumentRow>* rows)>& emit,
                           std::set<std::string>* unspliced) const;
  // Tails rendered from every member's entity.
  Status RenderBucketTails(StoreTransaction* txn, const ProjectionConfig& projection,
                           std::map<std::string, StoreTransaction::ReferrerBound> pending,
                           std::map<std::string, uint64_t>* next_bucket,
                           const std::function<Status(std::vector<DocumentRow>* rows)>& emit) const;

  // The buckets of in-place changes not covered by a tail (see BucketBound).
  Status BuildPointBuckets(StoreTransaction* txn, size_t projection,
                           const std::map<std::string, BucketBound>& bounds,
                           std::map<std::string, uint64_t>& total,
                           const std::function<Status(std::vector<DocumentRow>* rows)>& emit) const;

  const ProjectionPlan& plan_;
  uint64_t tail_page_rows_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_DOCUMENT_BUILDER_H_
