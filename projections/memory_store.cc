#include "projections/memory_store.h"

#include <algorithm>

#include "common/clock.h"
#include "projections/memory_bucket_tables.h"
#include "projections/memory_document_tables.h"
#include "projections/memory_reference_index.h"
#include "projections/memory_source_rows.h"
#include "projections/memory_stream_ledger.h"
#include "projections/memory_work.h"
#include "projections/memory_write_locks.h"

namespace denormd {

// The StoreTransaction: owns the transaction's MemoryWork and one object per
// role over it, and hands the roles out; marks the store's transaction open
// while it lives.
class MemoryTransaction : public StoreTransaction {
 public:
  explicit MemoryTransaction(MemoryStore* store)
      : store_(store),
        work_(store->state_),
        source_(work_),
        index_(work_),
        documents_(work_),
        buckets_(work_),
        ledger_(work_) {
    store_->open_ = true;
    store_->work_ = &work_;
  }
  ~MemoryTransaction() override {
    work_.Undo();
    store_->open_ = false;
    store_->work_ = nullptr;
  }

  SourceRows& source() override { return source_; }
  ReferenceIndex& index() override { return index_; }
  DocumentTables& documents() override { return documents_; }
  BucketTables& buckets() override { return buckets_; }
  StreamLedger& ledger() override { return ledger_; }
  WriteLocks& locks() override { return locks_; }

  Status Commit() override {
    work_.Commit();
    return Status::Ok();
  }

  void SetChangeSource(const std::string& source) override { work_.SetChangeSource(source); }

 private:
  MemoryStore* store_;
  MemoryWork work_;  // declared before the roles, which use it
  MemorySourceRows source_;
  MemoryReferenceIndex index_;
  MemoryDocumentTables documents_;
  MemoryBucketTables buckets_;
  MemoryStreamLedger ledger_;
  MemoryWriteLocks locks_;
};

namespace {

int64_t SeqOf(const std::string& text) { return text.empty() ? 0 : std::stoll(text); }

}  // namespace

// The same walk as PostgresOutbox::Read, with seqs for snapshots: read the
// open window past `after`; when it is exhausted and gave nothing, open the
// next window (through = until, until = the last seq handed out) once.
Status MemoryOutbox::Read(const OutboxCursor& from, size_t max, std::vector<OutboxRow>* rows,
                          OutboxCursor* next) {
  if (store_->transaction_open()) return Status::Busy("a transaction is open");
  const MemoryState& state = store_->state();
  OutboxCursor cursor = from;
  for (int window = 0; window < 2; ++window) {
    if (cursor.until.empty() || window == 1) {
      if (!cursor.until.empty()) cursor.through = cursor.until;
      cursor.until = std::to_string(state.outbox_seq);
      cursor.after = 0;
    }
    const int64_t behind = std::max(SeqOf(cursor.through), cursor.after);
    const int64_t until = SeqOf(cursor.until);
    for (const OutboxRow& row : state.outbox) {
      if (row.seq <= behind || row.seq > until) continue;
      if (rows->size() >= max) break;
      rows->push_back(row);
      cursor.after = row.seq;
    }
    if (!rows->empty()) break;
  }
  *next = cursor;
  return Status::Ok();
}

Status MemoryOutbox::Prune(const OutboxCursor& published, uint64_t sequence) {
  if (store_->transaction_open()) return Status::Busy("a transaction is open");
  MemoryState* state = store_->mutable_state();
  const int64_t through = SeqOf(published.through);
  const int64_t until = SeqOf(published.until);
  auto behind = [&](const OutboxRow& row) {
    return row.seq <= through || (row.seq <= until && row.seq <= published.after);
  };
  state->outbox.erase(std::remove_if(state->outbox.begin(), state->outbox.end(), behind),
                      state->outbox.end());
  state->feed_sequence = sequence;
  return Status::Ok();
}

Status MemoryOutbox::CheckProgress(const OutboxCursor& published, uint64_t sequence,
                                   std::string* problem) {
  problem->clear();
  const MemoryState& state = store_->state();
  const int64_t ahead = std::max(SeqOf(published.through), SeqOf(published.until));
  if (ahead > state.outbox_seq) {
    *problem = "its cursor reaches outbox seq " + std::to_string(ahead) +
               ", past the last the store handed out (" + std::to_string(state.outbox_seq) + ")";
  } else if (sequence < state.feed_sequence) {
    *problem = "its sequence " + std::to_string(sequence) + " is behind the " +
               std::to_string(state.feed_sequence) + " the store recorded as published";
  }
  return Status::Ok();
}

Status MemoryOutbox::Lag(OutboxLag* out) {
  const MemoryState& state = store_->state();
  out->rows = state.outbox.size();
  out->oldest_seconds = 0;
  if (!state.outbox.empty()) {
    out->oldest_seconds = std::max(0.0, UnixSeconds() - state.outbox.front().captured_at);
  }
  return Status::Ok();
}

Status MemoryStore::UndoOnRollback(std::function<void()> undo) {
  if (work_ == nullptr) return Status::Fatal("internal: no MemoryStore transaction is open");
  work_->OnUndo(std::move(undo));
  return Status::Ok();
}

Status MemoryStore::Begin(std::unique_ptr<StoreTransaction>* out) {
  if (open_) return Status::Fatal("a MemoryStore transaction is already open");
  out->reset(new MemoryTransaction(this));
  return Status::Ok();
}

}  // namespace denormd
