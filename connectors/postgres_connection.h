// PostgresStore's connection (postgres_store.h), shared by the files that
// implement it: the store's (postgres_store.cc) and its administration's
// (postgres_admin.cc). Internal to connectors/.
#ifndef DENORMD_CONNECTORS_POSTGRES_CONNECTION_H_
#define DENORMD_CONNECTORS_POSTGRES_CONNECTION_H_

#include <string>

#include <pqxx/pqxx>

#include "connectors/postgres_store.h"
#include "connectors/postgres_transaction.h"

namespace denormd {

struct PostgresStore::Connection {
  Connection(const std::string& options, const StoreConfig& store)
      : pq(WithConnectionDefaults(options, store)), state(pq) {
    // Every statement of the engine is a keyed lookup or a range of one key,
    // for which an index nested loop is the right plan at any table size.
    // Tables that grow fast (a first load) have statistics minutes old, with
    // which the planner picks scans and hash joins that cost seconds (a
    // 200,000-event load took 277 s instead of 21 s); forbid those for the
    // session (which also keeps the prepared statements' plans on indexes).
    //
    // Documents and entity data larger than ~2 kB are compressed in TOAST.
    // lz4 (PostgreSQL 14+, when built with it) compresses about twice as fast
    // as the default pglz: a bucket rewrite of 237 documents of 100 comments
    // took 31 ms instead of 70 ms. Values already stored keep their method.
    //
    // A hung statement or lock wait is cancelled after the configured
    // timeouts (the batch rolls back and is retried).
    //
    // libpqxx 6 would reopen a broken connection by itself on the next
    // statement: without these settings, and, in the middle of a
    // transaction (PostgresTransaction sends BEGIN itself), outside it.
    // A broken connection fails instead; the store opens a new one.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    pq.inhibit_reactivation(true);
#pragma GCC diagnostic pop
    pqxx::nontransaction session(pq);
    session.exec(SessionSettingsSql(store) + "; set enable_seqscan = off;"
                 " set enable_hashjoin = off; set enable_mergejoin = off;"
                 " select set_config('default_toast_compression', 'lz4', false) from pg_settings"
                 " where name = 'default_toast_compression' and 'lz4' = any(enumvals)");
  }
  pqxx::connection pq;
  ConnectionState state;
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_CONNECTION_H_
