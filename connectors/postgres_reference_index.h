// PostgresReferenceIndex: the ReferenceIndex of one PostgresTransaction,
// over the tables refs (one row per referrer: type, field, target, sort,
// id) and ref_counts (referrers per target, kept equal to the rows by
// every statement that writes them). Each read is one statement; each
// write of rows one statement with the rows as a JSON parameter.
//
// Also the SQL of an index-row write, which PostgresSourceRows puts in the
// statement that writes the entities the rows belong to.
//
// Runs through the transaction's PostgresWork, which must outlive it. Not
// thread-safe.
#ifndef DENORMD_CONNECTORS_POSTGRES_REFERENCE_INDEX_H_
#define DENORMD_CONNECTORS_POSTGRES_REFERENCE_INDEX_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "connectors/postgres_read_ahead.h"
#include "connectors/postgres_transaction_context.h"
#include "projections/json_writer.h"
#include "projections/store.h"

namespace denormd {

class PostgresWork;
class ProjectionPlan;

// Index rows as JSON: [type, field, target, sort hex, id].
void WriteIndexRow(JsonWriter& w, const EntityKey& key, const ReferenceRow& row);

// The index-row statements of one `with` (schema quoted): `i` inserts the
// rows of the JSON array in parameter `param` (those not there already),
// `d` deletes those of `param` (those there), and the final insert moves
// the per-target counters by what `i` and `d` returned (type, field,
// target, id; +1 per row inserted, -1 per row deleted, applied in key order
// so that concurrent writers cannot deadlock on the counters) for the rows
// of the relations `counted_rows` (IndexCounting) admits. With `then`, the
// counters' insert is the `with`'s last part and `then` (a select from `i`
// and `d`) its statement.
std::string InsertIndexRowsSql(const std::string& schema, const std::string& param);
std::string DeleteIndexRowsSql(const std::string& schema, const std::string& param);
std::string CountDeltasSql(const std::string& schema, const std::string& counted_rows,
                           const std::string& then = "");

// Which rows of `plan`'s relations move counters: those of the relations
// counted (Relation::counted: all but a link's sides and pairs).
IndexCounting IndexCountingOf(const ProjectionPlan& plan);

class PostgresReferenceIndex : public ReferenceIndex {
 public:
  explicit PostgresReferenceIndex(PostgresWork& work) : work_(work) {}

  // Two fields of one projection that read the same relation (a lookup and
  // an id list through one link) ask the same ranges one after the other:
  // the second is answered from the first, which ran under the same locks,
  // until this transaction writes index rows.
  // A question read ahead is answered from its rows (postgres_read_ahead.h).
  void ReadScanAhead(const Relation& relation, const std::vector<IndexRange>& ranges,
                     Read read) override;
  Status Scan(const Relation& relation, const std::vector<IndexRange>& ranges, Read read,
              std::vector<Referrer>* out) override;
  // Whole ranges are answered from counters read ahead (or by an earlier
  // Count) when every target's was (postgres_read_ahead.h).
  void ReadCountsAhead(const Relation& relation, const std::vector<std::string>& targets) override;
  Status Count(const Relation& relation, const std::vector<IndexRange>& ranges,
               std::map<std::string, uint64_t>* out) override;
  Status ListTargets(const Relation& relation, const std::string& after, size_t limit,
                     std::vector<std::string>* out) override;
  Status RowsOf(const std::vector<EntityKey>& entities, std::vector<StoredRow>* out) override;
  Status RecountTargets() override;
  Status WriteRows(const std::vector<OwnedRows>& writes, std::vector<WrittenRow>* written) override;

 private:
  // The counters of `targets` in `relation`: read now, or kept.
  Status CountWhole(const Relation& relation, const std::vector<std::string>& targets,
                    std::map<std::string, uint64_t>* out);

  PostgresWork& work_;
  // Counters read ahead or read, by (type, field, target), at
  // PostgresWork::index_writes.
  using CounterKey = std::tuple<std::string, std::string, std::string>;
  ReadAheadRows<CounterKey, uint64_t> counters_;
  struct ScanQuestion;
  // Scans read ahead, by question, at PostgresWork::index_writes.
  ReadAheadRows<std::string, std::vector<Referrer>> scans_ahead_;
  std::string last_scan_key_;         // Scan's last question ("": none kept)
  uint64_t last_scan_writes_ = 0;     // PostgresWork::index_writes() when it was asked
  std::vector<Referrer> last_scan_;   // and its answer
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_REFERENCE_INDEX_H_
