// MemorySourceRows: the SourceRows of one MemoryTransaction, over
// MemoryState::entities and the entities' index rows (MemoryWork's, shared
// with MemoryReferenceIndex). It keeps no journal for `denormd apply`
// (SourceRows' defaults).
//
// Writes through the transaction's MemoryWork, which must outlive it. Not
// thread-safe.
#ifndef DENORMD_PROJECTIONS_MEMORY_SOURCE_ROWS_H_
#define DENORMD_PROJECTIONS_MEMORY_SOURCE_ROWS_H_

#include <string>
#include <vector>

#include "projections/store.h"

namespace denormd {

class MemoryWork;

class MemorySourceRows : public SourceRows {
 public:
  explicit MemorySourceRows(MemoryWork& work) : work_(work) {}

  // Counts the records found in MemoryState::entities_loaded.
  Status LoadEntities(const std::vector<EntityKey>& keys,
                      std::vector<EntityRecord>* out) override;
  Status WriteEntities(const std::vector<EntityWrite>& writes) override;
  Status ListEntityIds(const std::string& type, const std::string& after, size_t limit,
                       std::vector<std::string>* out) override;
  // Kept while an apply is marked (MemoryState::model.applying).
  Status Journal(const std::vector<EntityChange>& changes) override;
  Status TakeJournal(size_t limit, std::vector<JournaledChange>* out) override;

 private:
  MemoryWork& work_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_MEMORY_SOURCE_ROWS_H_
