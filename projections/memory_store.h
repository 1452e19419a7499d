// MemoryStore: the Store in process memory, for tests of the projection
// language and the batch logic without a database server (and for
// `denormd test`).
//
// A transaction writes the state in place and journals how to undo each
// write; a transaction destroyed without Commit() undoes them in reverse, so
// a failed batch leaves nothing behind. Only one transaction may be open at a
// time (Begin fails otherwise); locks are no-ops. While an apply is marked
// (MemoryState::model.applying), batches journal their source changes. The
// store's administration (model record, status, prune, apply's switch) is
// projections/memory_admin.h.
//
// A transaction serves each role of projections/store.h with an object of its
// own, in a file of its own (memory_source_rows.h, memory_reference_index.h,
// memory_document_tables.h, memory_bucket_tables.h, memory_stream_ledger.h,
// memory_write_locks.h), over the transaction's shared MemoryWork
// (memory_work.h: the state, the undo of each write, the change capture).
#ifndef DENORMD_PROJECTIONS_MEMORY_STORE_H_
#define DENORMD_PROJECTIONS_MEMORY_STORE_H_

#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "projections/memory_state.h"
#include "projections/outbox.h"
#include "projections/store.h"
#include "projections/store_admin.h"

namespace denormd {

class MemoryWork;

class MemoryStore : public Store {
 public:
  // Fails (Fatal) while another transaction of this store is open.
  Status Begin(std::unique_ptr<StoreTransaction>* out) override;

  const MemoryState& state() const { return state_; }
  MemoryState* mutable_state() { return &state_; }
  // Captures the document changes of these collections in the outbox.
  void PublishCollections(std::vector<std::string> collections) {
    state_.published = std::set<std::string>(collections.begin(), collections.end());
  }
  bool transaction_open() const { return open_; }
  // Has `undo` run if the open transaction rolls back (administration that
  // changes the state beside it: apply's switch). Fatal when none is open.
  Status UndoOnRollback(std::function<void()> undo);

 private:
  friend class MemoryTransaction;
  MemoryState state_;
  bool open_ = false;
  MemoryWork* work_ = nullptr;  // the open transaction's
};

// The ChangeOutbox of a MemoryStore (which must outlive it). A cursor's
// `through` and `until` are seqs in decimal: the store commits one
// transaction at a time, so a seq handed out before a commit is committed
// (or rolled back) for good. Reads fail Busy while a transaction is open.
class MemoryOutbox : public ChangeOutbox {
 public:
  explicit MemoryOutbox(MemoryStore* store) : store_(store) {}
  Status Claim(bool* claimed) override {
    *claimed = true;
    return Status::Ok();
  }
  Status Read(const OutboxCursor& from, size_t max, std::vector<OutboxRow>* rows,
              OutboxCursor* next) override;
  Status Prune(const OutboxCursor& published, uint64_t sequence) override;
  Status CheckProgress(const OutboxCursor& published, uint64_t sequence,
                       std::string* problem) override;
  Status Lag(OutboxLag* out) override;

 private:
  MemoryStore* store_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_MEMORY_STORE_H_
