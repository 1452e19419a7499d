// StableLayout: `layout: stable` buckets (the default; docs/architecture.md,
// "Stable buckets").
//
// Each member of a group sits in exactly one bucket and stays there until it
// is deleted, leaves the group, or its bucket splits, merges or lends. A
// bucket covers a range of the group's order: from its first member's key
// (`lo`, kept in a column) up to the next bucket's `lo`; a new member goes to
// the bucket whose range holds its key. Buckets hold 1..size members and,
// except the group's last, at least ceil(size/2) after every batch (B-tree
// fill):
//   * a bucket over `size` splits evenly (the group's last bucket keeps
//     `size` and opens new buckets after it, so appends in order give exactly
//     the packed layout);
//   * a non-last bucket under ceil(size/2) merges with the next one when both
//     fit in one bucket, else borrows from it so that both are half full; an
//     empty bucket is deleted.
// So one member change rewrites the bucket it leaves or enters, and at most
// one neighbour or one new bucket: the cost follows the change, not the
// group's size.
//
// seq: readers page a group by ascending `seq`. Buckets keep their seq; a new
// bucket takes one between its neighbours' (or the last seq + 1 at the end of
// a group that was never re-spaced, + kSeqGap after). When two neighbours have
// no integer between them the group's buckets are re-spaced once, seq = rank *
// kSeqGap (one UPDATE of the group's buckets), which leaves 20 halvings of
// room in every gap: a re-spacing needs at least 20 splits inside one gap,
// i.e. about 10 * size inserts there, after the previous one.
//
// Like the packed layout's splice this trusts the stored buckets (their
// items and `lo`/`members`/`member_keys` columns); a group whose buckets do
// not add up is rendered whole, in the packed layout, and counted as
// rendered. A run's members now come from its buckets' member keys and the
// batch's changes, or from the reference index when a bucket has none.
#ifndef DENORMD_PROJECTIONS_BUCKETS_STABLE_LAYOUT_H_
#define DENORMD_PROJECTIONS_BUCKETS_STABLE_LAYOUT_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "projections/affected.h"
#include "projections/batch_stats.h"
#include "projections/store.h"

namespace denormd {

class StableLayout {
 public:
  // Room left between neighbouring seqs by a re-spacing.
  static constexpr int64_t kSeqGap = int64_t{1} << 20;

  // Renders whole groups (packed) and replaces their stored buckets.
  using RewriteGroups =
      std::function<Status(StoreTransaction& txn, const std::vector<std::string>& groups,
                           BatchStats* stats)>;

  StableLayout(const ProjectionConfig& projection, const Relation& relation,
               RewriteGroups rewrite)
      : projection_(projection), relation_(relation), rewrite_(std::move(rewrite)) {}

  // Applies the member changes of their groups (see the file comment).
  Status ApplyChanges(StoreTransaction& txn, const GroupChanges& changes,
                      BatchStats* stats) const;

  // Tells the store the probes ApplyChanges(`changes`) starts with
  // (BucketTables::ReadProbesAhead: a hint).
  void ReadAhead(StoreTransaction& txn, const GroupChanges& changes) const;

  // The least number of members of a bucket that is not its group's last.
  uint64_t min_fill() const { return (projection_.size + 1) / 2; }

  // What `verify` checks of one group: its stored buckets (`stored`, any
  // order) against its members now (`members`, in order, with data). Appends
  // one line per problem: an empty, overfull or underfull (not last) bucket,
  // seqs not in member order or repeated, a member in two buckets or in
  // none, items out of order, a document or its columns (lo, member_keys
  // where present) not matching its items. Content and invariants only: which bucket holds whom may differ
  // from a rebuild.
  void CheckGroup(const std::string& group, const std::vector<const Referrer*>& members,
                  std::vector<DocumentRow> stored, std::vector<std::string>* problems) const;

 private:
  class GroupPlanner;

  // Where a group needs room between seqs: from the lowest to the highest
  // of the gaps its new buckets found full (the seqs around them).
  struct RespaceRange {
    int64_t after = 0;
    int64_t before = 0;
  };

  // One pass over `changes`; groups whose seqs need re-spacing first are
  // left in *respace, untouched.
  Status ApplyOnce(StoreTransaction& txn, const GroupChanges& changes, BatchStats* stats,
                   std::map<std::string, RespaceRange>* respace) const;

  const ProjectionConfig& projection_;
  const Relation& relation_;
  const RewriteGroups rewrite_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_BUCKETS_STABLE_LAYOUT_H_
