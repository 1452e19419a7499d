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
#ifndef DENORMD_PROJECTIONS_MEMORY_STORE_H_
#define DENORMD_PROJECTIONS_MEMORY_STORE_H_

#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "projections/outbox.h"
#include "projections/store.h"
#include "projections/store_admin.h"

namespace denormd {

struct MemoryState {
  struct Document {
    std::string projection;
    std::optional<std::string> pk;
    std::string json;
    std::optional<BucketMeta> bucket;
    std::string id;
  };
  // The index rows of one entity, as (relation name, target, sort).
  struct IndexRow {
    std::string relation;
    std::string target;
    std::string sort;
  };
  std::map<EntityKey, EntityRecord> entities;
  std::map<EntityKey, std::vector<IndexRow>> references;
  // (type, relation name, target) -> keys of its referrers, in order
  std::map<std::tuple<std::string, std::string, std::string>, std::set<IndexKey>> index;
  // collection -> key -> document; the key is the id, or "<pk>\x1f<id>" in a
  // shared collection (keyed on (pk, id) like PostgreSQL's).
  std::map<std::string, std::map<std::string, Document>> collections;
  // Documents written or deleted per collection, ever (for tests that bound
  // what a change costs).
  std::map<std::string, uint64_t> document_writes;
  // Index rows that scans returned per relation ("book.authorIds": the
  // referring type and the relation's name), ever (idem: what a change reads).
  std::map<std::string, uint64_t> referrers_read;
  // Entity records loaded, and index rows inserted or deleted, ever (idem).
  uint64_t entities_loaded = 0;
  uint64_t index_rows_written = 0;
  std::map<std::pair<std::string, int32_t>, StoredPosition> positions;
  std::vector<DeadLetter> dead_letters;
  std::vector<FanOutStat> fanouts;  // one hour: the store's lifetime
  // The change outbox: the changes of the `published` collections, in
  // capture order (seq ascending; a rolled-back change leaves a gap, as a
  // PostgreSQL sequence does), until pruned.
  std::set<std::string> published;
  std::vector<OutboxRow> outbox;
  int64_t outbox_seq = 0;       // the last seq handed out
  uint64_t feed_sequence = 0;   // what the last Prune recorded
  // When each entity record was last written and each dead letter received
  // (Unix seconds; parallel to dead_letters), for prune's retention (a test
  // may backdate them).
  std::map<EntityKey, double> updated_at;
  std::vector<double> dead_letters_received_at;
  // What administration keeps (projections/memory_admin.h): the model the
  // store runs (epoch 0: none), the index fingerprint ("": none), the
  // changes batches journal while `model.applying` is set, and whether the
  // administration lock is held.
  StoredModel model;
  std::string index_fingerprint;
  std::deque<SourceRows::JournaledChange> journal;
  bool administration_locked = false;
};

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
  std::vector<std::function<void()>>* undo_ = nullptr;  // the open transaction's
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
