// The administration of the PostgreSQL store (projections/store_admin.h):
// PostgresStore's status, prune, administration lock and apply's tables
// (postgres_admin.cc), the lock itself, and the factory of PostgreSQL
// stores the commands use.
#ifndef DENORMD_CONNECTORS_POSTGRES_ADMIN_H_
#define DENORMD_CONNECTORS_POSTGRES_ADMIN_H_

#include <cstdint>
#include <memory>
#include <string>

#include "config/config.h"
#include "connectors/postgres_store.h"
#include "projections/store_admin.h"

namespace denormd {

// The AdministrationLock of a schema on PostgreSQL: a session advisory
// lock, held on a connection of its own that is never reopened: when that
// connection ends, the lock is gone and Check() says so. Released on
// destruction. Not thread-safe.
class PostgresAdministrationLock : public AdministrationLock {
 public:
  // Takes the lock of `config`'s schema without waiting: Busy, naming
  // `command` and the schema, when another process holds it.
  static Status Acquire(const Config& config, const std::string& conninfo,
                        const std::string& command, std::unique_ptr<AdministrationLock>* out);
  ~PostgresAdministrationLock() override;

  Status Check() override;

  // Whether some process holds `config`'s lock now (taken and released at
  // once when free).
  static Status IsHeld(const Config& config, const std::string& conninfo, bool* held);

  // The advisory lock's key (pg_locks: classid the high 32 bits, objid the
  // low 32) for `schema`.
  static int64_t Key(const std::string& schema);

 private:
  PostgresAdministrationLock() = default;
  struct Connection;
  std::unique_ptr<Connection> connection_;
  std::string schema_;
};

// The stores of configs on the PostgreSQL server `conninfo` (a libpq
// connection string): PostgresStores, not opened.
StoreFactory PostgresStores(const std::string& conninfo);

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_ADMIN_H_
