// PostgresBucketTables: the BucketTables (projections/buckets/bucket_tables.h)
// of one PostgresTransaction, over the bucket columns of the collection
// tables (seq, number, lo_sort, lo_id, members; postgres_document_tables.h
// writes them with the documents). Each method is one statement, sent at
// once: the bucket code waits for every answer. A re-spacing is captured in
// the outbox like a document write.
//
// Runs through the transaction's PostgresWork, which must outlive it. Not
// thread-safe.
#ifndef DENORMD_CONNECTORS_POSTGRES_BUCKET_TABLES_H_
#define DENORMD_CONNECTORS_POSTGRES_BUCKET_TABLES_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "connectors/postgres_read_ahead.h"
#include "projections/buckets/bucket_tables.h"

namespace denormd {

class PostgresWork;

class PostgresBucketTables : public BucketTables {
 public:
  explicit PostgresBucketTables(PostgresWork& work) : work_(work) {}

  // A question read ahead is answered from its rows while no document of
  // the collection was written since (postgres_read_ahead.h).
  void ReadProbesAhead(const ProjectionConfig& projection,
                       const std::vector<std::pair<std::string, IndexKey>>& probes) override;
  Status ProbeBuckets(const ProjectionConfig& projection,
                      const std::vector<std::pair<std::string, IndexKey>>& probes,
                      std::vector<BucketSlot>* out) override;
  Status MaxBucketNumbers(const ProjectionConfig& projection,
                          const std::vector<std::string>& groups,
                          std::map<std::string, uint64_t>* out) override;
  Status RespaceBuckets(const ProjectionConfig& projection, const std::string& group,
                        int64_t after, int64_t before, int64_t step,
                        uint64_t* written) override;

 private:
  struct ProbeQuestion;

  PostgresWork& work_;
  // Probes read ahead, by question, at PostgresWork::document_writes of the
  // projection's collection.
  ReadAheadRows<std::string, std::vector<BucketSlot>> probes_ahead_;
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_BUCKET_TABLES_H_
