#include "projections/buckets/stable_layout.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <unordered_set>

#include "projections/buckets/bucket_documents.h"
#include "projections/buckets/bucket_tables.h"
#include "projections/reference_index.h"

namespace denormd {

namespace {

// A bucket of a group as the batch plans it: a stored one (`exists`) or one
// it opens.
struct PlanBucket {
  bool exists = true;
  std::string id;
  BucketMeta meta;     // stored (exists), or assigned (new)
  bool first = false;  // the group's first bucket
  bool last = false;   // the group's last bucket
  int64_t count = 0;   // members after the batch
  bool rewrite = false;
  bool remove = false;
};

// Consecutive buckets of a group, in order (known to be neighbours).
using Segment = std::vector<PlanBucket>;

// Consecutive buckets of one segment rewritten together, and the range of the
// group's order they cover.
struct Run {
  size_t segment = 0;
  size_t begin = 0, end = 0;      // buckets [begin, end) of the segment
  std::optional<IndexKey> lower;  // from here (none: the group's start)
  std::optional<IndexKey> upper;  // up to here, exclusive (none: the group's end)
  uint64_t old_members = 0;
  uint64_t new_members = 0;
};

struct GroupPlan {
  std::vector<Segment> segments;
  std::vector<Run> runs;
  bool whole = false;     // render the group whole (packed)
  bool rendered = false;  // ... because its stored buckets did not add up
  bool respace = false;   // no room between two seqs: re-space first
  int64_t respace_after = 0, respace_before = 0;  // the full gaps, lowest to highest
  bool new_numbers = false;
};

bool InRange(const IndexKey& key, const std::optional<IndexKey>& lower,
             const std::optional<IndexKey>& upper) {
  return (!lower || !(key < *lower)) && (!upper || key < *upper);
}

// A group's member changes, indexed for the runs that splice them.
struct GroupMoves {
  explicit GroupMoves(const std::vector<MemberChange>& changes) {
    for (const MemberChange& change : changes) {
      changed.insert(change.id);
      if (change.before) befores.push_back(*change.before);
    }
    std::sort(befores.begin(), befores.end());
  }
  std::unordered_set<std::string> changed;  // ids
  std::vector<IndexKey> befores;            // their keys before the batch, sorted
};

bool SameItem(const std::string& a, const std::string& b) {
  if (a == b) return true;
  JsonDocument x, y;
  return ParseJson(a, &x).ok() && ParseJson(b, &y).ok() && JsonEquals(x, y);
}

}  // namespace

// Plans one group: which buckets the changes touch, the splits, merges and
// borrows that restore the fill, the seqs of new buckets, and the runs of
// buckets to rewrite. Works on bucket metadata only.
class StableLayout::GroupPlanner {
 public:
  GroupPlanner(const StableLayout& layout, const std::vector<MemberChange>& changes)
      : layout_(layout), size_(static_cast<int64_t>(layout.projection_.size)), changes_(changes) {}

  // `windows`: the slots each of the group's probes found.
  GroupPlan Plan(const std::vector<std::vector<BucketSlot>>& windows) {
    BuildSegments(windows);
    if (plan_.segments.empty()) {
      plan_.whole = true;  // no buckets yet: a new group
      return std::move(plan_);
    }
    if (!AssignChanges()) return Whole();
    for (Segment& segment : plan_.segments) FixFill(&segment);
    for (size_t s = 0; s < plan_.segments.size(); ++s) {
      if (!AssignSeqs(&plan_.segments[s]) || !CollectRuns(s)) return Whole();
    }
    return std::move(plan_);
  }

 private:
  GroupPlan Whole() {
    plan_ = GroupPlan();
    plan_.whole = true;
    plan_.rendered = true;
    return std::move(plan_);
  }

  // Known buckets in order, split where two are not known to be neighbours
  // (each probe's window is a contiguous stretch of the group).
  void BuildSegments(const std::vector<std::vector<BucketSlot>>& windows) {
    std::map<std::string, PlanBucket> by_id;
    std::set<std::pair<std::string, std::string>> adjacent;
    for (std::vector<BucketSlot> window : windows) {
      std::sort(window.begin(), window.end(),
                [](const BucketSlot& a, const BucketSlot& b) { return *a.meta.lo < *b.meta.lo; });
      size_t below = 0;
      for (const BucketSlot& slot : window) {
        below += slot.below ? 1 : 0;
        PlanBucket& bucket = by_id[slot.id];
        bucket.id = slot.id;
        bucket.meta = slot.meta;
        bucket.count = static_cast<int64_t>(slot.meta.members);
      }
      for (size_t i = 0; i + 1 < window.size(); ++i) adjacent.insert({window[i].id, window[i + 1].id});
      if (window.empty()) continue;
      if (below < BucketTables::kProbeWindow) by_id[window.front().id].first = true;
      if (window.size() - below < BucketTables::kProbeWindow) by_id[window.back().id].last = true;
    }
    std::vector<PlanBucket> all;
    for (auto& entry : by_id) all.push_back(std::move(entry.second));
    std::sort(all.begin(), all.end(),
              [](const PlanBucket& a, const PlanBucket& b) { return *a.meta.lo < *b.meta.lo; });
    for (size_t i = 0; i < all.size(); ++i) {
      if (i == 0 || !adjacent.count({plan_.segments.back().back().id, all[i].id})) {
        plan_.segments.emplace_back();
      }
      plan_.segments.back().push_back(std::move(all[i]));
    }
  }

  // The bucket whose range holds `key`: the last whose lo is at or before
  // it, or the group's first when the key precedes every lo.
  PlanBucket* Locate(const IndexKey& key) {
    PlanBucket* found = nullptr;
    PlanBucket* lowest = nullptr;
    for (Segment& segment : plan_.segments) {
      for (PlanBucket& bucket : segment) {
        if (lowest == nullptr) lowest = &bucket;
        if (!(key < *bucket.meta.lo)) found = &bucket;
      }
    }
    if (found == nullptr && lowest != nullptr && lowest->first) found = lowest;
    return found;
  }

  bool AssignChanges() {
    for (const MemberChange& change : changes_) {
      for (const auto* key : {&change.before, &change.after}) {
        if (!*key) continue;
        PlanBucket* bucket = Locate(**key);
        if (bucket == nullptr) return false;
        bucket->rewrite = true;
        const bool in_place = change.before && change.after && *change.before == *change.after;
        if (in_place) break;
        bucket->count += key == &change.before ? -1 : 1;
      }
    }
    for (const Segment& segment : plan_.segments) {
      for (const PlanBucket& bucket : segment) {
        if (bucket.count < 0) return false;
      }
    }
    return true;
  }

  // Restores 1..size members per bucket and ceil(size/2) for all but the
  // group's last, in order.
  void FixFill(Segment* segment) {
    const int64_t min = static_cast<int64_t>(layout_.min_fill());
    for (size_t i = 0; i < segment->size(); ++i) {
      PlanBucket* b = &(*segment)[i];
      if (b->remove) continue;
      if (b->count > size_) {
        Split(segment, i);
        continue;
      }
      const size_t next = NextLive(*segment, i + 1);
      const bool group_last = IsGroupLast(*segment, i);
      if (b->count == 0) {
        b->remove = true;
        if (b->last) MoveLastFlagBack(segment, i);
        continue;
      }
      if (b->count >= min || group_last || next == segment->size()) continue;
      PlanBucket* n = &(*segment)[next];
      b->rewrite = true;
      n->rewrite = true;
      if (b->count + n->count <= size_) {  // merge
        b->count += n->count;
        n->count = 0;
        n->remove = true;
        if (n->last) b->last = true;
      } else {  // borrow: both at least half full
        const int64_t total = b->count + n->count;
        b->count = (total + 1) / 2;
        n->count = total - b->count;
      }
      --i;  // b may now be over `size` (never: merge fits) or fine; re-check n next
    }
  }

  // Splits bucket i: evenly into ceil(count/size) buckets, or, for the
  // group's last bucket, `size` kept and the rest in new buckets after it.
  void Split(Segment* segment, size_t i) {
    PlanBucket& b = (*segment)[i];
    b.rewrite = true;
    std::vector<int64_t> counts;
    if (b.last) {
      counts.push_back(size_);
      for (int64_t rest = b.count - size_; rest > 0; rest -= size_) {
        counts.push_back(std::min(size_, rest));
      }
    } else {
      const int64_t parts = (b.count + size_ - 1) / size_;
      for (int64_t p = 0; p < parts; ++p) counts.push_back(b.count / parts + (p < b.count % parts));
    }
    const bool was_last = b.last;
    b.count = counts[0];
    b.last = false;
    std::vector<PlanBucket> added;
    for (size_t p = 1; p < counts.size(); ++p) {
      PlanBucket nb;
      nb.exists = false;
      nb.count = counts[p];
      nb.rewrite = true;
      added.push_back(nb);
    }
    if (was_last) added.back().last = true;
    plan_.new_numbers = true;
    segment->insert(segment->begin() + i + 1, added.begin(), added.end());
  }

  static size_t NextLive(const Segment& segment, size_t from) {
    while (from < segment.size() && segment[from].remove) ++from;
    return from;
  }

  // Whether bucket i is its group's last live bucket: the group's last is at
  // or after it in this segment, and no live bucket follows it.
  static bool IsGroupLast(const Segment& segment, size_t i) {
    if (NextLive(segment, i + 1) != segment.size()) return false;
    for (size_t j = i; j < segment.size(); ++j) {
      if (segment[j].last) return true;
    }
    return false;
  }

  // Hands the group's-last flag of removed bucket i to the live bucket before
  // it. Without one in the segment (every bucket up to i is removed: a group
  // emptied, or its tail) bucket i keeps it: the segment still reaches the
  // group's end, so the run of removed buckets is known to end there.
  static void MoveLastFlagBack(Segment* segment, size_t i) {
    for (size_t j = i; j-- > 0;) {
      if (!(*segment)[j].remove) {
        (*segment)[i].last = false;
        (*segment)[j].last = true;
        return;
      }
    }
  }

  // Seqs for the new buckets: between their neighbours', or after the
  // group's last. False when the segment does not reach a neighbour it needs.
  bool AssignSeqs(Segment* segment) {
    for (size_t i = 0; i < segment->size();) {
      if ((*segment)[i].exists) {
        ++i;
        continue;
      }
      size_t end = i;
      while (end < segment->size() && !(*segment)[end].exists) ++end;
      const int64_t prev = (*segment)[i - 1].meta.seq;  // splits follow an existing bucket
      const int64_t k = static_cast<int64_t>(end - i);
      int64_t step;
      if (end < segment->size()) {
        const int64_t next = (*segment)[end].meta.seq;
        const int64_t gap = next - prev;
        if (gap <= k) {  // no room: noted, and the other gaps looked at
          plan_.respace_after = plan_.respace ? std::min(plan_.respace_after, prev) : prev;
          plan_.respace_before = plan_.respace ? std::max(plan_.respace_before, next) : next;
          plan_.respace = true;
          i = end;
          continue;
        }
        step = gap / (k + 1);
      } else {
        if (!SegmentHasGroupLast(*segment)) return false;
        step = prev < kSeqGap ? 1 : kSeqGap;
      }
      for (int64_t j = 1; j <= k; ++j) (*segment)[i + j - 1].meta.seq = prev + step * j;
      i = end;
    }
    return true;
  }

  static bool SegmentHasGroupLast(const Segment& segment) {
    return std::any_of(segment.begin(), segment.end(), [](const PlanBucket& b) { return b.last; });
  }

  // The runs of consecutive buckets to rewrite in segment s, with the range
  // of the group's order each covers.
  bool CollectRuns(size_t s) {
    const Segment& segment = plan_.segments[s];
    for (size_t i = 0; i < segment.size();) {
      const PlanBucket& first = segment[i];
      if (!first.rewrite && !first.remove) {
        ++i;
        continue;
      }
      Run run;
      run.segment = s;
      run.begin = i;
      if (!first.exists) return false;
      if (!first.first) run.lower = first.meta.lo;
      while (i < segment.size() && (segment[i].rewrite || segment[i].remove)) {
        if (segment[i].exists) run.old_members += segment[i].meta.members;
        if (!segment[i].remove) run.new_members += static_cast<uint64_t>(segment[i].count);
        ++i;
      }
      run.end = i;
      if (i < segment.size()) {
        run.upper = segment[i].meta.lo;
      } else if (!SegmentHasGroupLast(segment)) {
        return false;  // the bucket after the run is unknown
      }
      plan_.runs.push_back(run);
    }
    return true;
  }

  const StableLayout& layout_;
  const int64_t size_;
  const std::vector<MemberChange>& changes_;
  GroupPlan plan_;
};

namespace {

// Where a batch's changes probe the buckets: each member key before and
// after, once per group, in the order of the changes.
std::vector<std::pair<std::string, IndexKey>> ProbesOf(const GroupChanges& changes) {
  std::vector<std::pair<std::string, IndexKey>> probes;
  std::set<std::pair<std::string, IndexKey>> seen;
  for (const auto& group : changes) {
    for (const MemberChange& change : group.second) {
      for (const auto* key : {&change.before, &change.after}) {
        if (*key && seen.insert({group.first, **key}).second) probes.push_back({group.first, **key});
      }
    }
  }
  return probes;
}

// What one batch does to the stable buckets of one projection, step by step:
// probe, plan, read, splice, write.
class StableBatch {
 public:
  StableBatch(const ProjectionConfig& projection, const Relation& relation,
              StoreTransaction& txn)
      : projection_(projection), relation_(relation), txn_(txn) {}

  Status Probe(const GroupChanges& changes,
               std::map<std::string, std::vector<std::vector<BucketSlot>>>* windows) {
    const std::vector<std::pair<std::string, IndexKey>> probes = ProbesOf(changes);
    std::vector<BucketSlot> slots;
    DENORMD_RETURN_IF_ERROR(txn_.buckets().ProbeBuckets(projection_, probes, &slots));
    std::vector<std::vector<BucketSlot>> by_probe(probes.size());
    for (BucketSlot& slot : slots) by_probe[slot.probe].push_back(std::move(slot));
    for (size_t i = 0; i < probes.size(); ++i) {
      if (!by_probe[i].empty()) (*windows)[probes[i].first].push_back(std::move(by_probe[i]));
    }
    return Status::Ok();
  }

  // Numbers for the new buckets of the planned groups: after the group's
  // largest.
  Status Number(std::map<std::string, GroupPlan>* plans) {
    std::vector<std::string> groups;
    for (const auto& entry : *plans) {
      if (!entry.second.whole && !entry.second.respace && entry.second.new_numbers) {
        groups.push_back(entry.first);
      }
    }
    std::map<std::string, uint64_t> max;
    DENORMD_RETURN_IF_ERROR(txn_.buckets().MaxBucketNumbers(projection_, groups, &max));
    for (const std::string& group : groups) {
      uint64_t next = max[group] + 1;
      for (Segment& segment : (*plans)[group].segments) {
        for (PlanBucket& bucket : segment) {
          if (bucket.exists) continue;
          bucket.meta.number = next++;
          bucket.id = BucketDocumentId(group, bucket.meta.number);
        }
      }
    }
    return Status::Ok();
  }

  // Reads what the runs need: the stored buckets they rewrite, their
  // members now (keys), and the entities of the members to render. A run's
  // members come from its stored buckets' keys and the batch's changes; the
  // run's range of the reference index is read only when a bucket has no
  // keys or they do not fit the changes.
  Status Read(const std::map<std::string, GroupPlan>& plans, const GroupChanges& changes) {
    std::vector<std::string> documents;
    for (const auto& entry : plans) {
      const GroupPlan& plan = entry.second;
      if (plan.whole || plan.respace) continue;
      for (const Run& run : plan.runs) {
        for (size_t i = run.begin; i < run.end; ++i) {
          const PlanBucket& bucket = plan.segments[run.segment][i];
          if (bucket.exists) documents.push_back(bucket.id);
        }
      }
    }
    std::vector<DocumentRow> rows;
    if (!documents.empty()) DENORMD_RETURN_IF_ERROR(txn_.documents().Load(projection_, documents, &rows));
    for (DocumentRow& row : rows) stored_[row.id] = std::move(row);
    std::vector<IndexRange> ranges;
    for (const auto& entry : plans) {
      const GroupPlan& plan = entry.second;
      if (plan.whole || plan.respace) continue;
      for (const Run& run : plan.runs) {
        if (!MembersFromStoredKeys(entry.first, plan, run, changes.at(entry.first))) {
          ranges.push_back({entry.first, run.lower, false, run.new_members + 1});
        }
      }
    }
    std::vector<Referrer> scanned;
    if (!ranges.empty()) {
      DENORMD_RETURN_IF_ERROR(
          txn_.index().Scan(relation_, ranges, ReferenceIndex::Read::kKeys, &scanned));
    }
    for (const Referrer& member : scanned) members_[member.target].push_back(member.key());
    for (auto& entry : members_) {  // a scanned range can reach into the next run's
      std::sort(entry.second.begin(), entry.second.end());
      entry.second.erase(std::unique(entry.second.begin(), entry.second.end()), entry.second.end());
    }
    std::vector<EntityKey> keys;
    for (const auto& group : changes) {
      for (const MemberChange& change : group.second) {
        if (change.after) keys.push_back({relation_.entity_type(), change.id});
      }
    }
    // One sample per run: its first member, to check stored items against.
    for (const auto& entry : plans) {
      for (const Run& run : entry.second.runs) {
        const std::vector<IndexKey>& members = members_[entry.first];
        auto it = From(members, run.lower);
        if (it != members.end()) keys.push_back({relation_.entity_type(), it->id});
      }
    }
    std::vector<EntityRecord> records;
    if (!keys.empty()) DENORMD_RETURN_IF_ERROR(txn_.source().LoadEntities(keys, &records));
    for (EntityRecord& record : records) {
      if (record.live()) entities_[record.key.id] = std::move(record);
    }
    return Status::Ok();
  }

  // The documents of one run; false when the stored buckets do not add up.
  // `moves` is the group's changes, indexed once for all its runs.
  bool Splice(const std::string& group, const GroupPlan& plan, const Run& run,
              const GroupMoves& moves, std::vector<DocumentRow>* rows,
              std::vector<std::string>* removed) {
    // The members now, in order: exactly new_members of them in the range.
    const std::vector<IndexKey>& members = members_[group];
    const auto first = From(members, run.lower);
    auto last = first;
    while (last != members.end() && InRange(*last, run.lower, run.upper)) ++last;
    if (static_cast<uint64_t>(last - first) != run.new_members) return false;
    // The members before the batch, in order, are the changed ones at their
    // old keys (their stored items are dropped there) merged with the
    // unchanged ones; the two never share a key (keys end with the id).
    const auto left_begin = From(moves.befores, run.lower);
    auto left_end = left_begin;
    while (left_end != moves.befores.end() && InRange(*left_end, run.lower, run.upper)) ++left_end;
    size_t unchanged = 0;
    for (auto it = first; it != last; ++it) unchanged += moves.changed.count(it->id) ? 0 : 1;
    const size_t old_count = unchanged + static_cast<size_t>(left_end - left_begin);
    std::vector<std::string> old_items;
    if (!StoredItems(plan, run, &old_items) || old_items.size() != old_count ||
        old_count != run.old_members) {
      return false;
    }
    // Every member now is either changed (it entered the range: rendered
    // now) or unchanged; the k-th unchanged one was member k + (changed old
    // keys below it) before the batch.
    std::vector<std::string> items;
    items.reserve(run.new_members);
    size_t kept = 0;
    auto left = left_begin;
    bool sampled = false;
    for (auto it = first; it != last; ++it) {
      if (moves.changed.count(it->id)) {
        auto entity = entities_.find(it->id);
        if (entity == entities_.end()) return false;
        items.push_back(RenderItem(projection_, entity->second));
        continue;
      }
      while (left != left_end && *left < *it) ++left;
      std::string& item = old_items[kept++ + static_cast<size_t>(left - left_begin)];
      // A changed `select` (or an edited document) shows here: the run's
      // first member, loaded as a sample when it is unchanged, must render
      // to its stored item.
      if (!sampled) {
        sampled = true;
        auto entity = entities_.find(it->id);
        if (entity != entities_.end() &&
            !SameItem(item, RenderItem(projection_, entity->second))) {
          return false;
        }
      }
      items.push_back(std::move(item));
    }
    size_t at = 0;
    for (size_t i = run.begin; i < run.end; ++i) {
      const PlanBucket& bucket = plan.segments[run.segment][i];
      if (bucket.remove) {
        if (bucket.exists) removed->push_back(bucket.id);
        continue;
      }
      BucketMeta meta = bucket.meta;
      const auto begin = first + static_cast<std::ptrdiff_t>(at);
      meta.lo = *begin;
      meta.member_keys = PackIndexKeys(std::vector<IndexKey>(begin, begin + bucket.count));
      rows->push_back(BucketDocument(projection_, group, meta, items, at, at + bucket.count));
      at += static_cast<size_t>(bucket.count);
    }
    return true;
  }

 private:
  // The members of `run` now, from its stored buckets' keys (the members
  // before the batch) less the keys the group's changes left, plus those
  // they entered, added to members_[group]. False, adding nothing, when a
  // bucket has no keys or they do not fit: not `members` of them, not in
  // order inside the run's range, a key left that is not there or entered
  // twice, or not the planned count in the end.
  bool MembersFromStoredKeys(const std::string& group, const GroupPlan& plan, const Run& run,
                             const std::vector<MemberChange>& changes) {
    std::vector<IndexKey> before;
    before.reserve(run.old_members);
    for (size_t i = run.begin; i < run.end; ++i) {
      const PlanBucket& bucket = plan.segments[run.segment][i];
      if (!bucket.exists) continue;
      auto found = stored_.find(bucket.id);
      std::vector<IndexKey> own;
      if (found == stored_.end() || !found->second.bucket ||
          !found->second.bucket->member_keys ||
          !UnpackIndexKeys(*found->second.bucket->member_keys, &own) ||
          own.size() != bucket.meta.members) {
        return false;
      }
      before.insert(before.end(), std::make_move_iterator(own.begin()),
                    std::make_move_iterator(own.end()));
    }
    for (size_t i = 0; i < before.size(); ++i) {
      if (!InRange(before[i], run.lower, run.upper) || (i > 0 && !(before[i - 1] < before[i]))) {
        return false;
      }
    }
    std::vector<IndexKey> left, entered;
    for (const MemberChange& change : changes) {
      if (change.before && InRange(*change.before, run.lower, run.upper)) left.push_back(*change.before);
      if (change.after && InRange(*change.after, run.lower, run.upper)) entered.push_back(*change.after);
    }
    std::sort(left.begin(), left.end());
    std::sort(entered.begin(), entered.end());
    std::vector<IndexKey> stayed;
    std::set_difference(before.begin(), before.end(), left.begin(), left.end(),
                        std::back_inserter(stayed));
    if (stayed.size() + left.size() != before.size()) return false;  // a key left that was not there
    std::vector<IndexKey> now;
    now.reserve(stayed.size() + entered.size());
    std::merge(stayed.begin(), stayed.end(), entered.begin(), entered.end(), std::back_inserter(now));
    if (std::adjacent_find(now.begin(), now.end()) != now.end() ||
        now.size() != run.new_members) {
      return false;
    }
    std::vector<IndexKey>& members = members_[group];
    members.insert(members.end(), now.begin(), now.end());
    return true;
  }

  // The items of the run's stored buckets, in order, each bucket checked for
  // its member count.
  bool StoredItems(const GroupPlan& plan, const Run& run, std::vector<std::string>* items) {
    for (size_t i = run.begin; i < run.end; ++i) {
      const PlanBucket& bucket = plan.segments[run.segment][i];
      if (!bucket.exists) continue;
      auto found = stored_.find(bucket.id);
      std::vector<std::string> own;
      if (found == stored_.end() ||
          !SplitArrayField(found->second.json, projection_.field, &own) ||
          own.size() != bucket.meta.members) {
        return false;
      }
      for (std::string& item : own) items->push_back(std::move(item));
    }
    return true;
  }

  const ProjectionConfig& projection_;
  const Relation& relation_;
  StoreTransaction& txn_;
  // The first key at or after `lower` (the start without one).
  static std::vector<IndexKey>::const_iterator From(const std::vector<IndexKey>& keys,
                                                    const std::optional<IndexKey>& lower) {
    return lower ? std::lower_bound(keys.begin(), keys.end(), *lower) : keys.begin();
  }

  std::map<std::string, std::vector<IndexKey>> members_;  // group -> scanned keys, sorted
  std::map<std::string, DocumentRow> stored_;
  std::map<std::string, EntityRecord> entities_;
};

}  // namespace

void StableLayout::ReadAhead(StoreTransaction& txn, const GroupChanges& changes) const {
  txn.buckets().ReadProbesAhead(projection_, ProbesOf(changes));
}

Status StableLayout::ApplyChanges(StoreTransaction& txn, const GroupChanges& changes,
                                  BatchStats* stats) const {
  std::map<std::string, RespaceRange> respace;
  DENORMD_RETURN_IF_ERROR(ApplyOnce(txn, changes, stats, &respace));
  if (respace.empty()) return Status::Ok();
  GroupChanges again;
  for (const auto& entry : respace) {
    DENORMD_RETURN_IF_ERROR(txn.buckets().RespaceBuckets(projection_, entry.first,
                                                         entry.second.after, entry.second.before,
                                                         kSeqGap, &stats->documents_written));
    again.insert(*changes.find(entry.first));
  }
  std::map<std::string, RespaceRange> still;
  DENORMD_RETURN_IF_ERROR(ApplyOnce(txn, again, stats, &still));
  // A batch that opens more buckets in one gap than a re-spacing leaves room
  // for: render those groups whole.
  std::vector<std::string> whole;
  for (const auto& entry : still) whole.push_back(entry.first);
  if (!whole.empty()) DENORMD_RETURN_IF_ERROR(rewrite_(txn, whole, stats));
  return Status::Ok();
}

Status StableLayout::ApplyOnce(StoreTransaction& txn, const GroupChanges& changes,
                               BatchStats* stats, std::map<std::string, RespaceRange>* respace) const {
  StableBatch batch(projection_, relation_, txn);
  std::map<std::string, std::vector<std::vector<BucketSlot>>> windows;
  DENORMD_RETURN_IF_ERROR(batch.Probe(changes, &windows));
  std::map<std::string, GroupPlan> plans;
  for (const auto& group : changes) {
    plans[group.first] = GroupPlanner(*this, group.second).Plan(windows[group.first]);
  }
  DENORMD_RETURN_IF_ERROR(batch.Number(&plans));
  DENORMD_RETURN_IF_ERROR(batch.Read(plans, changes));
  std::vector<DocumentRow> rows;
  std::vector<std::string> removed, whole;
  for (const auto& entry : plans) {
    const GroupPlan& plan = entry.second;
    if (plan.respace) {
      (*respace)[entry.first] = {plan.respace_after, plan.respace_before};
      continue;
    }
    stats->units_recomputed++;
    bool spliced = !plan.whole;
    std::vector<DocumentRow> group_rows;
    std::vector<std::string> group_removed;
    const GroupMoves moves(changes.at(entry.first));
    for (size_t r = 0; spliced && r < plan.runs.size(); ++r) {
      spliced = batch.Splice(entry.first, plan, plan.runs[r], moves, &group_rows, &group_removed);
    }
    if (spliced) {
      stats->tails_spliced++;
      for (DocumentRow& row : group_rows) rows.push_back(std::move(row));
      for (std::string& id : group_removed) removed.push_back(std::move(id));
      continue;
    }
    whole.push_back(entry.first);
    // A new group has nothing stored to fit; any other group whose buckets
    // did not add up is rendered from its entities and counted.
    if (plan.rendered || !plan.whole) {
      stats->tails_rendered++;
    } else {
      stats->tails_spliced++;
    }
  }
  if (!rows.empty()) {
    DENORMD_RETURN_IF_ERROR(txn.documents().Upsert(projection_, rows, &stats->documents_written));
  }
  if (!removed.empty()) {
    DENORMD_RETURN_IF_ERROR(txn.documents().Delete(projection_, removed, &stats->documents_deleted));
  }
  if (!whole.empty()) DENORMD_RETURN_IF_ERROR(rewrite_(txn, whole, stats));
  return Status::Ok();
}

void StableLayout::CheckGroup(const std::string& group, const std::vector<const Referrer*>& members,
                              std::vector<DocumentRow> stored,
                              std::vector<std::string>* problems) const {
  const uint64_t size = projection_.size;
  auto problem = [&](const std::string& text) { problems->push_back(group + ": " + text); };
  std::sort(stored.begin(), stored.end(), [](const DocumentRow& a, const DocumentRow& b) {
    const int64_t sa = a.bucket ? a.bucket->seq : 0, sb = b.bucket ? b.bucket->seq : 0;
    return sa != sb ? sa < sb : a.id < b.id;
  });
  // Each bucket on its own: its items, their count, its document and columns.
  std::vector<std::vector<std::string>> items(stored.size());
  for (size_t i = 0; i < stored.size(); ++i) {
    const DocumentRow& row = stored[i];
    if (!row.bucket || !SplitArrayField(row.json, projection_.field, &items[i])) {
      problem("bucket " + row.id + " is not a bucket document (no seq, or no \"" +
              projection_.field + "\" array)");
      continue;
    }
    const uint64_t n = items[i].size();
    const bool last = i + 1 == stored.size();
    if (n == 0) problem("bucket " + row.id + " is empty");
    if (n > size) {
      problem("bucket " + row.id + " holds " + std::to_string(n) + " members, more than size " +
              std::to_string(size));
    }
    if (n > 0 && n < min_fill() && !last) {
      problem("bucket " + row.id + " holds " + std::to_string(n) + " members, fewer than " +
              std::to_string(min_fill()) + " though it is not the group's last (by seq)");
    }
    if (i > 0 && stored[i - 1].bucket && stored[i - 1].bucket->seq == row.bucket->seq) {
      problem("buckets " + stored[i - 1].id + " and " + row.id + " have the same seq " +
              std::to_string(row.bucket->seq));
    }
    JsonDocument doc, own;
    const DocumentRow rebuilt = BucketDocument(projection_, group, *row.bucket, items[i], 0, n);
    if (row.bucket->members != n || !ParseJson(row.json, &doc).ok() ||
        !ParseJson(rebuilt.json, &own).ok() || !JsonEquals(doc, own) ||
        row.id != BucketDocumentId(group, row.bucket->number)) {
      problem("bucket " + row.id + ": its document or its columns (id, seq, members) do not "
              "match its items");
    }
  }
  // The group as a whole: the items in seq order are its members' in order.
  // Compared as text first (what denormd wrote reads back as it was
  // written), in canonical JSON where the text differs (jsonb respells).
  std::vector<std::string> rendered;
  for (const Referrer* member : members) rendered.push_back(RenderItem(projection_, member->entity));
  std::vector<const std::string*> texts;
  for (const auto& own : items) {
    for (const std::string& text : own) texts.push_back(&text);
  }
  auto canonical = [](const std::string& text) {
    JsonDocument item;
    return ParseJson(text, &item).ok() ? CanonicalJson(item) : text;
  };
  bool same = texts.size() == rendered.size();
  for (size_t i = 0; same && i < texts.size(); ++i) {
    same = *texts[i] == rendered[i] || canonical(*texts[i]) == canonical(rendered[i]);
  }
  if (same) {
    size_t at = 0;  // and each bucket's lo and keys are its members'
    for (size_t i = 0; i < stored.size(); ++i) {
      const std::optional<BucketMeta>& meta = stored[i].bucket;
      if (!items[i].empty() && meta && !(meta->lo && *meta->lo == members[at]->key())) {
        problem("bucket " + stored[i].id + ": its lo column is not its first member's key");
      }
      std::vector<IndexKey> keys;
      if (meta && meta->member_keys) {
        bool keys_match = UnpackIndexKeys(*meta->member_keys, &keys) && keys.size() == items[i].size();
        for (size_t k = 0; keys_match && k < items[i].size(); ++k) {
          keys_match = keys[k] == members[at + k]->key();
        }
        if (!keys_match) {
          problem("bucket " + stored[i].id + ": its member_keys column is not its members' keys");
        }
      }
      at += items[i].size();
    }
    return;
  }
  std::vector<std::string> expected, found;
  for (const std::string& text : rendered) expected.push_back(canonical(text));
  std::map<std::string, std::vector<std::string>> where;  // item -> buckets holding it
  for (size_t i = 0; i < stored.size(); ++i) {
    for (const std::string& text : items[i]) {
      found.push_back(canonical(text));
      where[found.back()].push_back(stored[i].id);
    }
  }
  std::map<std::string, int64_t> surplus;  // found minus expected, per item
  for (const std::string& item : found) surplus[item]++;
  for (const std::string& item : expected) surplus[item]--;
  bool counted = false;
  for (size_t m = 0; m < members.size(); ++m) {
    int64_t& extra = surplus[expected[m]];
    if (extra > 0) {
      std::string buckets;
      for (const std::string& id : where[expected[m]]) buckets += (buckets.empty() ? "" : ", ") + id;
      problem("member " + members[m]->entity.key.id + " is in more than one bucket (" + buckets + ")");
      extra = 0;
      counted = true;
    } else if (extra < 0) {
      problem("member " + members[m]->entity.key.id + " is in no bucket");
      extra++;
      counted = true;
    }
  }
  for (const auto& entry : surplus) {
    if (entry.second > 0 && !where[entry.first].empty()) {
      problem("bucket " + where[entry.first][0] + " holds an item no member renders to: " +
              entry.first.substr(0, 200));
      counted = true;
    }
  }
  if (counted) return;
  // The same items, in another order: whole buckets out of seq order, or
  // items out of order inside one.
  for (size_t i = 0, at = 0; i < stored.size(); at += items[i].size(), ++i) {
    const std::vector<std::string> want(expected.begin() + std::min(at, expected.size()),
                                        expected.begin() + std::min(at + items[i].size(), expected.size()));
    std::vector<std::string> have;
    for (const std::string& text : items[i]) have.push_back(canonical(text));
    if (have == want) continue;
    std::vector<std::string> sorted_have = have, sorted_want = want;
    std::sort(sorted_have.begin(), sorted_have.end());
    std::sort(sorted_want.begin(), sorted_want.end());
    problem(sorted_have == sorted_want
                ? "the items of bucket " + stored[i].id + " are out of order"
                : "bucket " + stored[i].id + " (seq " + std::to_string(stored[i].bucket->seq) +
                      ") holds members out of seq order");
    return;
  }
}

}  // namespace denormd
