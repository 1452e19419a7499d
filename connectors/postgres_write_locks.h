// PostgresWriteLocks: the WriteLocks of one PostgresTransaction, over the
// tables writers (table-locked: shared by every batch, exclusive by a batch
// retried alone), meta (the configuration epoch, and whether an apply is
// building) and locks (one row per lock key, row-locked FOR UPDATE).
//
// Lock rows are created apart, by `provision` (a committed transaction on a
// connection of its own); the rows this connection knows to exist are
// remembered (ConnectionState::lock_rows), so that a batch whose keys are
// all known locks them in one statement without that round trip. Every
// statement is deferred (PostgresWork, "Round trips"): what their results
// must show (the epoch, a row per key, no NOWAIT refusal) is checked when
// they arrive, before anything can commit.
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
  // is `epoch` (0: any).
  PostgresWriteLocks(PostgresWork& work, uint64_t epoch, LockRowProvisioner provision)
      : work_(work), epoch_(epoch), provision_(std::move(provision)) {}

  // Also the configuration fence: once the lock is held no apply can switch
  // configurations until this transaction ends, and the epoch read after it
  // (its own statement, so its own snapshot) is the one in force. A
  // transaction of another epoch writes nothing (StaleConfig). While an
  // apply builds, the source changes written are journaled for it
  // (PostgresWork::Applying).
  Status LockWriters(bool exclusive) override;
  Status LockKeys(const std::vector<std::string>& keys, Mode mode) override;

 private:
  PostgresWork& work_;
  const uint64_t epoch_;  // the configuration epoch this process runs; 0 = unchecked
  LockRowProvisioner provision_;
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_WRITE_LOCKS_H_
