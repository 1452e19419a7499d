// MemoryReferenceIndex: the ReferenceIndex of one MemoryTransaction, over
// MemoryState::index (each target's referrer keys, ordered) and
// MemoryState::references (each entity's own rows). Counts are the sizes of
// the index's sets, so RecountTargets has nothing to repair. The index holds
// live entities only (tombstones have no rows).
//
// Counts the rows each scan returns in MemoryState::referrers_read. Writes
// through the transaction's MemoryWork, which must outlive it. Not
// thread-safe.
#ifndef DENORMD_PROJECTIONS_MEMORY_REFERENCE_INDEX_H_
#define DENORMD_PROJECTIONS_MEMORY_REFERENCE_INDEX_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "projections/store.h"

namespace denormd {

class MemoryWork;

class MemoryReferenceIndex : public ReferenceIndex {
 public:
  explicit MemoryReferenceIndex(MemoryWork& work) : work_(work) {}

  Status Scan(const Relation& relation, const std::vector<IndexRange>& ranges, Read read,
              std::vector<Referrer>* out) override;
  Status Count(const Relation& relation, const std::vector<IndexRange>& ranges,
               std::map<std::string, uint64_t>* out) override;
  Status ListTargets(const Relation& relation, const std::string& after, size_t limit,
                     std::vector<std::string>* out) override;
  Status RowsOf(const std::vector<EntityKey>& entities, std::vector<StoredRow>* out) override;
  Status RecountTargets() override { return Status::Ok(); }  // counts are the index's sizes
  Status WriteRows(const std::vector<OwnedRows>& writes, std::vector<WrittenRow>* written) override;

 private:
  // The keys of a range, in the range's order, at most its limit.
  std::vector<IndexKey> RangeKeys(const Relation& relation, const IndexRange& range) const;

  MemoryWork& work_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_MEMORY_REFERENCE_INDEX_H_
