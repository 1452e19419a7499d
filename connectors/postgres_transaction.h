// PostgresTransaction: one StoreTransaction on PostgreSQL, serving every role
// of projections/store.h with set-based statements: each bulk read or write
// is one statement with its rows passed as a single JSON or array parameter,
// never a statement per event or per document.
//
// The tables are described at PostgresStore (postgres_store.h).
#ifndef DENORMD_CONNECTORS_POSTGRES_TRANSACTION_H_
#define DENORMD_CONNECTORS_POSTGRES_TRANSACTION_H_

#include <functional>
#include <memory>
#include <string>

#include "projections/store.h"

namespace pqxx {
class connection_base;
}  // namespace pqxx

namespace denormd {

// Creates lock rows (for keys given as a bigint[] literal) in a committed
// transaction of its own.
using LockRowProvisioner = std::function<Status(const std::string& key_array)>;

// Starts a transaction on `connection` (which must outlive it) in `schema`.
Status BeginPostgresTransaction(pqxx::connection_base& connection, const std::string& schema,
                                LockRowProvisioner provision,
                                std::unique_ptr<StoreTransaction>* out);

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_TRANSACTION_H_
