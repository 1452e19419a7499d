// MemoryDocumentTables: the DocumentTables of one MemoryTransaction, over
// MemoryState::collections (each collection's documents by key: the id, or
// "<pk>\x1f<id>" in a shared collection, keyed on (pk, id) like
// PostgreSQL's), with change capture into MemoryState::outbox
// (MemoryWork::Capture). A row equal to the stored one (its JSON compared as
// values) is not rewritten.
//
// Counts every document written or deleted in MemoryState::document_writes.
// Writes through the transaction's MemoryWork, which must outlive it. Not
// thread-safe.
#ifndef DENORMD_PROJECTIONS_MEMORY_DOCUMENT_TABLES_H_
#define DENORMD_PROJECTIONS_MEMORY_DOCUMENT_TABLES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "projections/memory_state.h"
#include "projections/store.h"

namespace denormd {

class MemoryWork;

class MemoryDocumentTables : public DocumentTables {
 public:
  explicit MemoryDocumentTables(MemoryWork& work) : work_(work) {}

  Status Upsert(const ProjectionConfig& projection, const std::vector<DocumentRow>& rows,
                uint64_t* written) override;
  Status Delete(const ProjectionConfig& projection, const std::vector<std::string>& ids,
                uint64_t* deleted) override;
  Status DeleteByPkExcept(const ProjectionConfig& projection, const std::vector<std::string>& pks,
                          const std::vector<std::string>& keep, uint64_t* deleted) override;
  Status Load(const ProjectionConfig& projection, const std::vector<std::string>& ids,
              std::vector<DocumentRow>* out) override;
  Status LoadByPk(const ProjectionConfig& projection, const std::vector<std::string>& pks,
                  std::vector<DocumentRow>* out) override;
  Status ListKeys(const ProjectionConfig& projection, bool by_pk, const std::string& after,
                  size_t limit, std::vector<std::string>* out) override;

 private:
  using DocumentIt = std::map<std::string, MemoryState::Document>::iterator;
  // The document `id` of `projection`, or its collection's end().
  DocumentIt Find(const ProjectionConfig& projection, const std::string& id);
  // Deletes the document at `it` of `projection`'s collection, captured
  // under `id` and counted in *deleted; returns the document after it.
  DocumentIt Erase(const ProjectionConfig& projection, DocumentIt it, const std::string& id,
                   uint64_t* deleted);

  MemoryWork& work_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_MEMORY_DOCUMENT_TABLES_H_
