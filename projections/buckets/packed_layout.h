// PackedLayout: `layout: packed` buckets. Bucket n holds members
// size*n .. size*n+size-1 of the group's order, so a change in the middle of
// a group renumbers every bucket after it (its tail).
//
// A batch rewrites each changed group from the bucket holding its first
// changed member on. The tail is spliced, not re-rendered: its members are
// read by key only (an index range), the items of unchanged members are taken
// from the stored buckets they shift out of, and only the batch's changed
// members are rendered from their entities. This trusts the stored buckets to
// be this projection's output before the batch (denormd owns them; `verify`
// finds and `rebuild` repairs edits made behind its back); a group whose
// stored buckets do not fit (a missing bucket, a wrong number of items, an
// item that differs from what its member renders to now) is rendered from its
// entities instead and counted in BatchStats::tails_rendered. Members changed
// in place (same group, same place) rewrite only their own bucket.
//
// Tails are read in pages of `page_rows` members, so memory stays bounded
// when a change near the start of a large group shifts every later bucket.
#ifndef DENORMD_PROJECTIONS_BUCKETS_PACKED_LAYOUT_H_
#define DENORMD_PROJECTIONS_BUCKETS_PACKED_LAYOUT_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "projections/affected.h"
#include "projections/batch_stats.h"
#include "projections/reference_index.h"
#include "projections/store.h"

namespace denormd {

// What a batch changed in one group, as the packed layout needs it.
//
// The smallest key among the members changed before or after bounds the
// tail: buckets wholly before it are unchanged. `points` are members changed
// in place (same group, same key: only what their bucket shows changed); a
// point before the bound, or any point when there is no tail (`has_tail`
// false), rewrites just its own bucket. `old_keys` are the keys the changed
// members had in this group before the batch (points included), `fresh_ids`
// the changed members in the group now (points included), rendered from
// their entities; every other member of the tail keeps its stored item.
struct BucketBound {
  bool has_tail = false;
  IndexKey tail;
  std::vector<IndexKey> points;
  std::vector<IndexKey> old_keys;
  std::set<std::string> fresh_ids;
};

// The bound of each changed group.
std::map<std::string, BucketBound> PackedBounds(const GroupChanges& changes);

class PackedLayout {
 public:
  using Emit = std::function<Status(std::vector<DocumentRow>* rows)>;

  PackedLayout(const ProjectionConfig& projection, const Relation& relation, uint64_t page_rows)
      : projection_(projection), relation_(relation), page_rows_(page_rows) {}

  // Rewrites what `changes` moved in their groups (see the file comment).
  Status ApplyChanges(StoreTransaction& txn, const GroupChanges& changes,
                      BatchStats* stats) const;

  // Every bucket of each group, rendered from its members (rebuild, verify).
  Status BuildGroups(StoreTransaction& txn, const std::vector<std::string>& groups,
                     std::map<std::string, std::vector<DocumentRow>>* out) const;

 private:
  class TailSplicer;

  // The tails of `bounds`' groups, handed to `emit` in pages; *keep gets
  // the ids of every document those groups have now, *rendered the number
  // of groups rendered from their entities.
  Status BuildTails(StoreTransaction& txn, const std::map<std::string, BucketBound>& bounds,
                    const Emit& emit, std::vector<std::string>* keep, uint64_t* rendered) const;
  // Tails rendered from every member's entity, from `pending` on.
  Status RenderTails(StoreTransaction& txn, std::map<std::string, ReadStart> pending,
                     std::map<std::string, uint64_t>* next_bucket, const Emit& emit) const;
  // The buckets of in-place changes not covered by a tail.
  Status BuildPointBuckets(StoreTransaction& txn, const std::map<std::string, BucketBound>& bounds,
                           std::map<std::string, uint64_t>& total, const Emit& emit) const;

  const ProjectionConfig& projection_;
  const Relation& relation_;
  const uint64_t page_rows_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_BUCKETS_PACKED_LAYOUT_H_
