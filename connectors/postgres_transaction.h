// PostgresTransaction: one StoreTransaction on PostgreSQL, serving every role
// of projections/store.h with set-based statements: each bulk read or write
// is one statement with its rows passed as a single JSON or array parameter,
// never a statement per event or per document.
//
// The tables are described at PostgresStore (postgres_store.h).
#ifndef DENORMD_CONNECTORS_POSTGRES_TRANSACTION_H_
#define DENORMD_CONNECTORS_POSTGRES_TRANSACTION_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "projections/store.h"

namespace pqxx {
class connection_base;
}  // namespace pqxx

namespace denormd {

// Creates lock rows (for keys given as a bigint[] literal) in a committed
// transaction of its own.
using LockRowProvisioner = std::function<Status(const std::string& key_array)>;

// The statements prepared on one connection: each distinct SQL text is
// prepared once (PostgreSQL parses it once and may keep its plan) under a
// name of its own. Lives as long as the connection; not thread-safe.
class PreparedStatements {
 public:
  explicit PreparedStatements(pqxx::connection_base& connection);
  // The name `sql` is prepared under, preparing it on first use.
  const std::string& Name(const std::string& sql);

 private:
  pqxx::connection_base& connection_;
  std::map<std::string, std::string> names_;
};

// What a connection remembers between its transactions.
struct ConnectionState {
  explicit ConnectionState(pqxx::connection_base& connection) : statements(connection) {}
  PreparedStatements statements;
  // Lock rows known to exist (this process created or locked them), so that
  // a batch whose keys are all known locks them in one statement, without
  // the provisioning round trip. A row pruned meanwhile is noticed (fewer
  // rows locked) and provisioned again. Bounded: cleared past 4 M entries.
  std::unordered_set<int64_t> lock_rows;
};

// Which collections' document changes a transaction captures in the
// outbox (<schema>.outbox), and which of those have a partition key (a
// document whose pk changes is then also captured as deleted under the old
// one). Built once per store from the config.
struct ChangeCapture {
  std::set<std::string> published;
  std::set<std::string> partitioned;
};

// Starts a transaction on `connection` in `schema`; the connection, its
// state and `capture` must outlive it. Its LockWriters fails with
// StaleConfig unless the store's configuration epoch is `epoch` (0: any).
Status BeginPostgresTransaction(pqxx::connection_base& connection, ConnectionState& state,
                                const std::string& schema, const ChangeCapture& capture,
                                uint64_t epoch, LockRowProvisioner provision,
                                std::unique_ptr<StoreTransaction>* out);

// Runs one SQL statement in `txn`, which BeginPostgresTransaction began
// (Fatal for any other), after the statements it deferred; returns its rows
// as text, tab-separated (RowsAsText). For the store's administration
// (apply's switch), never the engine's roles.
Status ExecuteInPostgresTransaction(StoreTransaction& txn, const std::string& sql,
                                    std::vector<std::string>* rows);

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_TRANSACTION_H_
