#include "connectors/postgres_transaction.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "connectors/postgres_bucket_tables.h"
#include "connectors/postgres_document_tables.h"
#include "connectors/postgres_reference_index.h"
#include "connectors/postgres_source_rows.h"
#include "connectors/postgres_stream_ledger.h"
#include "connectors/postgres_work.h"
#include "connectors/postgres_write_locks.h"

namespace denormd {

namespace {

// The StoreTransaction: owns the transaction's PostgresWork and one object
// per role over it, and hands the roles out. Its own methods are the
// transaction's ends and counters, which are PostgresWork's.
class PostgresTransaction : public StoreTransaction {
 public:
  PostgresTransaction(pqxx::connection_base& connection, ConnectionState& state,
                      const std::string& schema, const ChangeCapture& capture,
                      const IndexCounting& counting, uint64_t epoch, uint64_t lock_timeout_ms)
      : work_(connection, state, schema, capture, counting),
        source_(work_),
        index_(work_),
        documents_(work_),
        buckets_(work_),
        ledger_(work_),
        locks_(work_, epoch, lock_timeout_ms) {}

  SourceRows& source() override { return source_; }
  ReferenceIndex& index() override { return index_; }
  DocumentTables& documents() override { return documents_; }
  BucketTables& buckets() override { return buckets_; }
  StreamLedger& ledger() override { return ledger_; }
  WriteLocks& locks() override { return locks_; }

  Status Commit() override { return work_.Commit(); }
  void SetChangeSource(const std::string& source) override { work_.SetChangeSource(source); }
  Status PinReadSnapshot() override { return work_.PinReadSnapshot(); }
  uint64_t round_trips() const override { return work_.round_trips(); }
  uint64_t statements() const override { return work_.statements(); }

  // Administration's statements in this transaction (apply's switch,
  // connectors/postgres_admin.cc): ExecuteInPostgresTransaction.
  Status RunStatement(const std::string& sql, std::vector<std::string>* rows) {
    return work_.Execute(sql, rows);
  }

 private:
  // Declared first: the roles are destroyed before it, and it rolls back
  // last.
  PostgresWork work_;
  PostgresSourceRows source_;
  PostgresReferenceIndex index_;
  PostgresDocumentTables documents_;
  PostgresBucketTables buckets_;
  PostgresStreamLedger ledger_;
  PostgresWriteLocks locks_;
};

}  // namespace

Status BeginPostgresTransaction(pqxx::connection_base& connection, ConnectionState& state,
                                const std::string& schema, const ChangeCapture& capture,
                                const IndexCounting& counting, uint64_t epoch,
                                uint64_t lock_timeout_ms, std::unique_ptr<StoreTransaction>* out) {
  return Guard("starting a transaction", [&] {
    *out = std::make_unique<PostgresTransaction>(connection, state, schema, capture, counting,
                                                 epoch, lock_timeout_ms);
  });
}

Status ExecuteInPostgresTransaction(StoreTransaction& txn, const std::string& sql,
                                    std::vector<std::string>* rows) {
  auto* postgres = dynamic_cast<PostgresTransaction*>(&txn);
  if (postgres == nullptr) return Status::Fatal("internal: not a PostgreSQL transaction");
  return postgres->RunStatement(sql, rows);
}

}  // namespace denormd
