// PostgresWriteLocks: the WriteLocks of one PostgresTransaction, over the
// tables writers (table-locked: shared by every batch, exclusive by a batch
// retried alone), meta (the configuration epoch, and whether an apply is
// building) and locks (one row per lock key, row-locked by an INSERT ... ON
// CONFLICT DO UPDATE that updates nothing).
//
// A missing lock row is created by the statement that locks the keys, in
// the transaction (LockKeys), so a lock costs no round trip of its own and a
// prune that removes rows beside it (PostgresStore::Prune) only makes it
// wait for the prune's chunk. Every statement is deferred (PostgresWork,
// "Round trips"): what their results must show (the epoch, no lock refused
// in kWaitBriefly) is checked when they arrive, before anything can commit.
//
// Runs through the transaction's PostgresWork, which must outlive it. Not
// thread-safe.
#ifndef DENORMD_CONNECTORS_POSTGRES_WRITE_LOCKS_H_
#define DENORMD_CONNECTORS_POSTGRES_WRITE_LOCKS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "connectors/postgres_transaction_context.h"
#include "projections/store.h"

namespace denormd {

class PostgresWork;

class PostgresWriteLocks : public WriteLocks {
 public:
  // LockWriters fails (StaleConfig) unless the store's configuration epoch
  // is `epoch` (0: any). `session_lock_timeout_ms` is the connection's
  // lock_timeout (store.lock_timeout_ms), restored after a brief wait.
  PostgresWriteLocks(PostgresWork& work, uint64_t epoch, uint64_t session_lock_timeout_ms)
      : work_(work), epoch_(epoch), session_lock_timeout_ms_(session_lock_timeout_ms) {}

  // How long kWaitBriefly waits for a key: longer than a prune holds a
  // chunk of lock rows (PostgresStore::kLockRowsPerChunk), far shorter than
  // a batch holds its keys.
  static constexpr uint64_t kBriefLockWaitMs = 20;

  // Also the configuration fence: once the lock is held no apply can switch
  // configurations until this transaction ends, and the epoch read after it
  // (its own statement, so its own snapshot) is the one in force. A
  // transaction of another epoch writes nothing (StaleConfig). While an
  // apply builds, the source changes written are journaled for it
  // (PostgresWork::Applying).
  Status LockWriters(bool exclusive) override;
  Status LockWritersOf(const std::vector<std::string>& parts, bool alone) override;
  // kWaitBriefly: PostgreSQL's lock_timeout, kBriefLockWaitMs, for this
  // statement (55P03 is Busy).
  Status LockKeys(const std::vector<std::string>& keys, Mode mode) override;

  // The ids of the advisory locks (PostgreSQL's, database-wide, so keyed on
  // `quoted_schema`, QuoteIdentifier of the schema): the writers' and each
  // part's (a name of PartOfType).
  static int64_t WritersLockId(const std::string& quoted_schema);
  static int64_t PartLockId(const std::string& quoted_schema, const std::string& part);

 private:
  Status Join(const char* table_mode, const std::string& advisory);

  PostgresWork& work_;
  const uint64_t epoch_;  // the configuration epoch this process runs; 0 = unchecked
  const uint64_t session_lock_timeout_ms_;
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_WRITE_LOCKS_H_
