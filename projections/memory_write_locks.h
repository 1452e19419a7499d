// MemoryWriteLocks: the WriteLocks of a MemoryTransaction. A MemoryStore runs
// one transaction at a time (MemoryStore::Begin refuses a second), so there
// is nothing to lock: every method succeeds at once. Thread-safe (it holds
// nothing).
#ifndef DENORMD_PROJECTIONS_MEMORY_WRITE_LOCKS_H_
#define DENORMD_PROJECTIONS_MEMORY_WRITE_LOCKS_H_

#include <string>
#include <vector>

#include "projections/store.h"

namespace denormd {

class MemoryWriteLocks : public WriteLocks {
 public:
  Status LockWriters(bool /*exclusive*/) override { return Status::Ok(); }
  Status LockWritersOf(const std::vector<std::string>& /*parts*/, bool /*alone*/) override {
    return Status::Ok();
  }
  Status LockKeys(const std::vector<std::string>& /*keys*/, Mode /*mode*/) override {
    return Status::Ok();
  }
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_MEMORY_WRITE_LOCKS_H_
