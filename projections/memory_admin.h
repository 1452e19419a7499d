// MemoryAdministration: the StoreAdministration of a MemoryStore, so that
// `denormd plan`, `apply`, `status` and `prune` (and rebuild's model record)
// run in a test without a server. The model record, the index fingerprint,
// the apply journal and the administration lock are kept in the
// MemoryState (memory_store.h); a collection built beside a live one is one
// more collection of the state, "<collection><suffix>", and the switch
// renames it.
//
// Several MemoryAdministrations (of several configs) may share one
// MemoryStore: apply's live, built and control stores do, as they share one
// schema on PostgreSQL. What differs from PostgreSQL, by design: no epoch
// fence on transactions (one process), no lock rows or counters to prune
// (lock_rows and zero_counts stay 0), nothing to adopt or cancel, the lock
// cannot be lost, and a collection exists once Open or a write made it.
// Not thread-safe.
#ifndef DENORMD_PROJECTIONS_MEMORY_ADMIN_H_
#define DENORMD_PROJECTIONS_MEMORY_ADMIN_H_

#include <memory>
#include <string>
#include <vector>

#include "projections/memory_store.h"
#include "projections/store_admin.h"

namespace denormd {

class MemoryAdministration : public StoreAdministration {
 public:
  // The store of `config` in `store`; both must outlive this.
  MemoryAdministration(const Config& config, MemoryStore* store);

  Status Begin(std::unique_ptr<StoreTransaction>* out) override { return store_->Begin(out); }

  using StoreAdministration::Open;
  Status Open(OpenMode mode) override;
  Status Adopt(std::vector<std::string>* adopted) override;
  Status ReadModel(StoredModel* out) override;
  const StoredModel& stored_model() const override { return model_; }
  Status RecordModel() override;
  Status MarkIndexCurrent() override;

  Status Summarize(StoreSummary* out) override;
  Status Prune(const RetentionConfig& retention, size_t chunk_rows, PruneReport* report,
               const std::function<void(const PruneReport&)>& progress,
               const std::function<bool()>& stop) override;
  Status CancelRunningStatement() override { return Status::Ok(); }

  Status LockAdministration(const std::string& command,
                            std::unique_ptr<AdministrationLock>* out) override;
  Status AdministrationLocked(bool* held) override;

  Status MarkApplying(const std::string& applying) override;
  Status AbandonApply(uint64_t* journal_rows) override;
  Status DropBuiltCollections(const std::string& suffix) override;
  Status RemoveRelationsExcept(const std::vector<RelationName>& kept) override;
  Status RemoveRelations(const std::vector<RelationName>& dropped) override;
  Status CompareBuilt(const std::string& collection, const std::string& suffix,
                      BuiltComparison* out) override;
  Status CountDocuments(const std::string& collection, uint64_t* out) override;
  Status SwitchModel(StoreTransaction& txn, const ModelSwitch& change, bool* switched) override;

 private:
  // Administration works on the state directly, never beside an open
  // transaction (except SwitchModel, inside its own).
  Status NoTransactionOpen() const;
  // Removes the index rows of the relations `remove` says yes to.
  void RemoveRelationsIf(const std::function<bool(const RelationName&)>& remove);

  const Config& config_;
  MemoryStore* store_;
  MemoryState& state_;
  StoredModel model_;  // as Open/RecordModel read it
};

// The stores of configs in `store` (which must outlive them): MemoryAdministrations.
StoreFactory MemoryStores(MemoryStore* store);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_MEMORY_ADMIN_H_
