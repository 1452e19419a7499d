// PostgresTransaction: one StoreTransaction on PostgreSQL. It owns the
// transaction's PostgresWork (postgres_work.h: the server transaction, its
// deferred statements and round trips, what the roles share) and one object
// per role of projections/store.h over it, each in a file of its own:
//   SourceRows      postgres_source_rows.h      entities, apply_journal
//   ReferenceIndex  postgres_reference_index.h  refs, ref_counts
//   DocumentTables  postgres_document_tables.h  the collections, outbox
//   BucketTables    postgres_bucket_tables.h    the collections' bucket columns
//   StreamLedger    postgres_stream_ledger.h    positions, dead_letters, fanout_stats
//   WriteLocks      postgres_write_locks.h      writers, meta, locks
// Every role runs set-based statements: each bulk read or write is one
// statement with its rows passed as a single JSON or array parameter, never
// a statement per event or per document.
//
// The tables are described at PostgresStore (postgres_store.h).
#ifndef DENORMD_CONNECTORS_POSTGRES_TRANSACTION_H_
#define DENORMD_CONNECTORS_POSTGRES_TRANSACTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "connectors/postgres_transaction_context.h"
#include "projections/store.h"

namespace pqxx {
class connection_base;
}  // namespace pqxx

namespace denormd {

// Starts a transaction on `connection` in `schema`; the connection, its
// state, `capture` and `counting` must outlive it. Its LockWriters fails with
// StaleConfig unless the store's configuration epoch is `epoch` (0: any);
// `lock_timeout_ms` is the connection's lock_timeout (SessionSettingsSql).
Status BeginPostgresTransaction(pqxx::connection_base& connection, ConnectionState& state,
                                const std::string& schema, const ChangeCapture& capture,
                                const IndexCounting& counting, uint64_t epoch,
                                uint64_t lock_timeout_ms, std::unique_ptr<StoreTransaction>* out);

// Runs one SQL statement in `txn`, which BeginPostgresTransaction began
// (Fatal for any other), after the statements it deferred; returns its rows
// as text, tab-separated (RowsAsText). For the store's administration
// (apply's switch), never the engine's roles.
Status ExecuteInPostgresTransaction(StoreTransaction& txn, const std::string& sql,
                                    std::vector<std::string>* rows);

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_TRANSACTION_H_
