// PostgresDocumentTables: the DocumentTables of one PostgresTransaction, over
// one table per collection, <schema>.<collection> (id, doc jsonb, pk,
// projection, and the bucket columns seq, number, lo_sort, lo_id, members,
// member_keys), with change capture into <schema>.outbox in the statement
// that writes (PostgresWork::CaptureCte).
//
// Writes are deferred (PostgresWork, "Round trips"): their counts are added,
// and a clash of keys in a shared collection refuses the transaction, when
// their result arrives, with the next read or before COMMIT.
//
// Runs through the transaction's PostgresWork, which must outlive it. Not
// thread-safe.
#ifndef DENORMD_CONNECTORS_POSTGRES_DOCUMENT_TABLES_H_
#define DENORMD_CONNECTORS_POSTGRES_DOCUMENT_TABLES_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "connectors/postgres_read_ahead.h"
#include "projections/store.h"

namespace pqxx {
class result;
}  // namespace pqxx

namespace denormd {

class PostgresWork;

class PostgresDocumentTables : public DocumentTables {
 public:
  explicit PostgresDocumentTables(PostgresWork& work) : work_(work) {}

  // Rows go in statements of about this many bytes of JSON each: a
  // statement ends after the row that reaches it, so a larger row goes alone.
  static constexpr size_t kUpsertJsonBytes = 1 << 20;

  // In statements of kUpsertJsonBytes each, deferred.
  Status Upsert(const ProjectionConfig& projection, const std::vector<DocumentRow>& rows,
                uint64_t* written) override;
  Status Delete(const ProjectionConfig& projection, const std::vector<std::string>& ids,
                uint64_t* deleted) override;
  Status DeleteByPkExcept(const ProjectionConfig& projection, const std::vector<std::string>& pks,
                          const std::vector<std::string>& keep, uint64_t* deleted) override;
  // Answered from documents read ahead (or by an earlier Load) when every
  // id's was, and no document of the collection was written since
  // (postgres_read_ahead.h).
  void ReadAhead(const ProjectionConfig& projection, const std::vector<std::string>& ids) override;
  Status Load(const ProjectionConfig& projection, const std::vector<std::string>& ids,
              std::vector<DocumentRow>* out) override;
  Status LoadByPk(const ProjectionConfig& projection, const std::vector<std::string>& pks,
                  std::vector<DocumentRow>* out) override;
  Status ListKeys(const ProjectionConfig& projection, bool by_pk, const std::string& after,
                  size_t limit, std::vector<std::string>* out) override;

 private:
  // Deletes the documents of `projection` matching `condition` (over $2 and,
  // when `b` is not empty, $3), capturing them when the collection is published.
  Status DeleteWhere(const ProjectionConfig& projection, const std::string& condition,
                     const std::string& a, const std::string& b, uint64_t* deleted);
  // The statement that loads documents of `projection` by `column` ($2,
  // an array), and its rows.
  std::string LoadSql(const ProjectionConfig& projection, const std::string& column);
  static std::vector<DocumentRow> DocumentRows(const pqxx::result& rows);
  // The documents of `projection` whose `column` is one of `values`.
  Status LoadDocumentsWhere(const ProjectionConfig& projection, const std::string& column,
                            const std::vector<std::string>& values, std::vector<DocumentRow>* out);

  PostgresWork& work_;
  // Documents read ahead or loaded, by (projection, id), at
  // PostgresWork::document_writes of their collection (one ReadAheadRows
  // per projection: each collection has its own count of writes).
  std::map<std::string, ReadAheadRows<std::string, DocumentRow>> read_;
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_DOCUMENT_TABLES_H_
