// MemoryBucketTables: the BucketTables (projections/buckets/bucket_tables.h)
// of one MemoryTransaction, over the bucket metadata of the documents in
// MemoryState::collections (MemoryDocumentTables writes it with the
// documents). A re-spaced bucket is a document write: counted in
// MemoryState::document_writes and captured in the outbox.
//
// Writes through the transaction's MemoryWork, which must outlive it. Not
// thread-safe.
#ifndef DENORMD_PROJECTIONS_MEMORY_BUCKET_TABLES_H_
#define DENORMD_PROJECTIONS_MEMORY_BUCKET_TABLES_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "projections/buckets/bucket_tables.h"

namespace denormd {

class MemoryWork;

class MemoryBucketTables : public BucketTables {
 public:
  explicit MemoryBucketTables(MemoryWork& work) : work_(work) {}

  // Answers every probe, each from a scan of its group's buckets.
  Status ProbeBuckets(const ProjectionConfig& projection,
                      const std::vector<std::pair<std::string, IndexKey>>& probes,
                      std::vector<BucketSlot>* out) override;
  Status MaxBucketNumbers(const ProjectionConfig& projection,
                          const std::vector<std::string>& groups,
                          std::map<std::string, uint64_t>* out) override;
  // Fatal when a stored bucket's JSON does not parse.
  Status RespaceBuckets(const ProjectionConfig& projection, const std::string& group,
                        int64_t after, int64_t before, int64_t step,
                        uint64_t* written) override;

 private:
  MemoryWork& work_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_MEMORY_BUCKET_TABLES_H_
