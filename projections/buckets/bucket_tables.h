// BucketTables: the store's role that only bucket projections use, beside
// DocumentTables (projections/store.h), over the same document tables: it
// finds buckets by their place in a group, numbers them and re-spaces their
// seqs. The bucket columns themselves (BucketMeta) travel with every
// document row and are written and read by DocumentTables; what those
// columns mean, and the packed form of `member_keys`, are this module's.
//
// A StoreTransaction hands it out (StoreTransaction::buckets()); each store
// implements it in a file of its own: connectors/postgres_bucket_tables.h,
// projections/memory_bucket_tables.h. Its methods follow the rules of
// every role (projections/store.h): Transient for what a retry of the batch
// can cure, Fatal otherwise; the document changes they make are captured
// in the change outbox like DocumentTables' (a re-spaced bucket is a
// changed document). Not thread-safe.
#ifndef DENORMD_PROJECTIONS_BUCKETS_BUCKET_TABLES_H_
#define DENORMD_PROJECTIONS_BUCKETS_BUCKET_TABLES_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "projections/store.h"

namespace denormd {

// A list of keys as bytes (BucketMeta::member_keys): for each key, the
// lengths of its sort and id as varints, then their bytes.
std::string PackIndexKeys(const std::vector<IndexKey>& keys);
// False when `bytes` is not such a list.
bool UnpackIndexKeys(const std::string& bytes, std::vector<IndexKey>* keys);

// A bucket found around a key of its group (BucketTables::ProbeBuckets).
struct BucketSlot {
  size_t probe = 0;   // index of the probe it answers
  bool below = false; // first member at or before the probe's key (else after)
  std::string id;
  BucketMeta meta;
};

class BucketTables {
 public:
  virtual ~BucketTables() = default;

  // Bucket projections (`stable` layout). For each probe (group, key): the
  // up to `kProbeWindow` buckets of the group whose first member is at or
  // before the key (nearest first) and the up to `kProbeWindow` after it, by
  // their `lo`, metadata only (json empty). Probes of one group whose keys
  // lie in the same bucket's range (or all before its first) have the same
  // window; a store may answer only one of them.
  static constexpr size_t kProbeWindow = 3;
  virtual Status ProbeBuckets(const ProjectionConfig& projection,
                              const std::vector<std::pair<std::string, IndexKey>>& probes,
                              std::vector<BucketSlot>* out) = 0;
  // A hint: ProbeBuckets will be asked exactly `probes` of `projection` in
  // this transaction (as SourceRows::ReadAhead).
  virtual void ReadProbesAhead(const ProjectionConfig& projection,
                               const std::vector<std::pair<std::string, IndexKey>>& probes) {
    (void)projection;
    (void)probes;
  }
  // The largest bucket number of each group that has buckets.
  virtual Status MaxBucketNumbers(const ProjectionConfig& projection,
                                  const std::vector<std::string>& groups,
                                  std::map<std::string, uint64_t>* out) = 0;
  // Makes room in `group` between the bucket with seq `after` and the one
  // with seq `before` (after < before, and every seq between them): re-spaces
  // the buckets on one side, `step` apart in the order of their `lo` (column
  // and document). The side with fewer buckets: those below `before`, then
  // ending at `before` - `step` (seqs may go below 0), or those above
  // `after`, then starting at `after` + `step` (on a tie). *written counts
  // rows.
  virtual Status RespaceBuckets(const ProjectionConfig& projection, const std::string& group,
                                int64_t after, int64_t before, int64_t step,
                                uint64_t* written) = 0;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_BUCKETS_BUCKET_TABLES_H_
