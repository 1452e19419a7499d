// StoreAdministration: what commands do to a store as a whole, beside the
// batches' transactions (projections/store.h), the way leveldb keeps DestroyDB
// and RepairDB beside DB::Open: open the store (its tables, the model it
// runs), read and record that model, summarize it for `status`, prune what
// retention no longer keeps, and the steps of `denormd plan` and `apply`
// (daemon/apply.h) in the store's own terms: mark an apply, build collections
// beside the live ones (through the store of a config whose collections are
// named "<collection><suffix>"), compare what was built with what is live,
// switch, and remove what no model keeps.
//
// A StoreAdministration is the Store of one config, which it borrows (the
// data path sees only the Store). Two implementations:
//   connectors/postgres_store.h   PostgresStore (its administration in
//                                 connectors/postgres_admin.cc)
//   projections/memory_admin.h    MemoryAdministration, over a MemoryStore
// so that apply, plan, status and prune run in tests without a server, and
// tests/daemon/admin_memory_equals_postgres_test.cc holds the two equal.
//
// Errors as the Store's: Transient when a retry can cure it, Fatal otherwise,
// InvalidInput for a store this config can never use. Not thread-safe (one
// thread at a time), except CancelRunningStatement.
#ifndef DENORMD_PROJECTIONS_STORE_ADMIN_H_
#define DENORMD_PROJECTIONS_STORE_ADMIN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "projections/outbox.h"
#include "projections/store.h"

namespace denormd {

// What `denormd status` shows.
struct StoreSummary {
  std::vector<StoredPosition> positions;
  // Tables a killed `denormd plan` or `apply` left ("<collection>__next",
  // "__plan"); the next plan or apply removes them.
  std::vector<std::string> leftover_tables;
  std::vector<std::pair<std::string, uint64_t>> documents;  // collection -> count
  std::vector<std::pair<std::string, uint64_t>> entities;   // type -> live count
  uint64_t dead_letters = 0;
  uint64_t tombstones = 0;
  // The change feed (when the config has one).
  bool feed = false;
  OutboxLag outbox;                 // changes waiting to be published
  std::string feed_relay;           // the relay's transactional id, "" before it published
  uint64_t feed_sequence = 0;       // the last sequence number it published
  double feed_published_seconds_ago = 0;
};

// What one prune removed.
struct PruneReport {
  uint64_t tombstones = 0;    // entity records of deletes older than the horizon
  uint64_t dead_letters = 0;  // by age and beyond the count cap
  uint64_t lock_rows = 0;     // lock rows no batch held (a store that keeps them)
  uint64_t zero_counts = 0;   // per-target counters at 0 (idem)
  // An `applying` mark no apply holds the lock for (a killed apply's) was
  // removed, with its journal and its __next tables.
  bool stale_apply_cleared = false;
  uint64_t stale_journal_rows = 0;  // the journal rows removed with it
  uint64_t total() const { return tombstones + dead_letters + lock_rows + zero_counts; }
};

// The configuration model a store runs: what `denormd apply` (or the first
// start) recorded.
struct StoredModel {
  uint64_t epoch = 0;       // 1 at the first start, +1 per change of the model
  std::string fingerprint;  // ModelFingerprint of the model
  std::string yaml;         // Config::model_yaml
  std::string applying;     // "" or what an unfinished apply recorded (JSON)
};

// The one lock of everything that changes a schema's model or its index:
// `apply`, `rebuild`, `plan`'s scratch tables, `adopt`. Released on
// destruction. Not thread-safe.
class AdministrationLock {
 public:
  virtual ~AdministrationLock() = default;
  // Ok while the lock is held; Fatal ("lost the administration lock ...")
  // once it is not (the command must then abort: another may hold it now).
  virtual Status Check() = 0;
};

// A relation of the reference index: (entity type, relation name).
using RelationName = std::pair<std::string, std::string>;

// What replacing a live collection with the one built beside it does,
// counted (StoreAdministration::CompareBuilt). A built and a live document are
// the same document when their projection, id and pk are (a pk that changed
// makes another document).
struct BuiltComparison {
  uint64_t written = 0;    // built documents that are new or differ from the live one
  uint64_t unchanged = 0;  // built documents equal to the live one
  uint64_t matched = 0;    // built documents that have a live one
  uint64_t live = 0;       // live documents (0 when the live collection does not exist)
};

// Apply's switch (StoreAdministration::SwitchModel), made in the transaction
// that took the rest of the journal.
struct ModelSwitch {
  uint64_t from_epoch = 0;  // compare and set: switches only from this epoch
  std::string suffix;       // the built collections are "<collection><suffix>"
  std::vector<std::string> rebuilt;   // replaced by their built collections
  std::vector<std::string> dropped;   // removed
  // Of `rebuilt`, those the change feed publishes: the documents the switch
  // writes or deletes in them go to the outbox (when the store has one),
  // attributed to `capture_source`.
  std::vector<std::string> captured;
  std::string capture_source;
  // The model recorded: its YAML, fingerprint and index fingerprint.
  std::string model_yaml;
  std::string model_fingerprint;
  std::string index_fingerprint;
};

class StoreAdministration : public Store {
 public:
  // What Open requires of the store, and what it may create.
  enum class OpenMode {
    // The store runs this config's model (else StaleConfig, naming plan and
    // apply; nothing is created) and its index was built for these
    // relations (else InvalidInput naming `denormd rebuild`): replay, run,
    // verify.
    kRunsThisModel,
    // Any model, any index; the config's collections are created only when
    // the store runs its model (a collection `apply` removed must not come
    // back): status, prune, relay.
    kInspect,
    // Any model, any index; the config's collections are created: rebuild
    // (which then records the model), and the collections `apply` builds.
    kBuild,
  };

  // ---- Opening and the model

  // Connects and creates what does not exist yet (idempotent; safe with
  // several instances starting at once) as `mode` says, and records the
  // config's model when the store has none. The stored model is then in
  // stored_model(). Every transaction begun afterwards is fenced on the
  // stored epoch (StaleConfig once it moves), where the store fences.
  virtual Status Open(OpenMode mode) = 0;
  Status Open() { return Open(OpenMode::kRunsThisModel); }
  // Marks as denormd's what a release before the mark of ownership created
  // (PostgreSQL; a store without such a mark adopts nothing). `adopted` (may
  // be null) gets the names marked.
  virtual Status Adopt(std::vector<std::string>* adopted) = 0;
  // Reads the stored model afresh (not the one Open saw); epoch 0: none.
  virtual Status ReadModel(StoredModel* out) = 0;
  // The model Open (or RecordModel) read.
  virtual const StoredModel& stored_model() const = 0;
  // Records the config's model as the one the store runs (after rebuild),
  // only from the epoch Open read (else StaleConfig); the epoch moves when
  // the model changed, so running instances reload.
  virtual Status RecordModel() = 0;
  // Records that the reference index now matches the config (after rebuild).
  virtual Status MarkIndexCurrent() = 0;

  // ---- Inspection and housekeeping

  virtual Status Summarize(StoreSummary* out) = 0;
  // Removes the state `retention` says is no longer needed (see
  // RetentionConfig): tombstones past the horizon, old dead letters and
  // those beyond the cap (and what a store keeps for its locks and counters
  // that no batch needs), then ClearStaleApply. Works in chunks of at most
  // `chunk_rows` (a store may take larger ones for a kind of row, and says
  // why), each its own short transaction that skips what a batch holds, so
  // it is safe beside running instances. `progress` (may be empty)
  // is told the totals after every chunk; `stop` (may be empty) is asked
  // before every chunk and ends the prune early, what was removed kept.
  virtual Status Prune(const RetentionConfig& retention, size_t chunk_rows, PruneReport* report,
                       const std::function<void(const PruneReport&)>& progress,
                       const std::function<bool()>& stop) = 0;
  // When the store records `applying` and no apply holds the administration
  // lock (the apply was killed), removes the mark, the journal batches kept
  // writing for it and its __next collections, under the lock (AbandonApply).
  // *cleared (may be null) says whether it did, *journal_rows (may be null)
  // how many journal rows went.
  Status ClearStaleApply(bool* cleared, uint64_t* journal_rows);
  // Cancels what the store is running for this object's transactions, if
  // anything (a batch stuck behind a lock or a hung server): the batch then
  // fails and rolls back. Thread-safe: meant for another thread (a stop
  // request). A store in process has nothing to cancel.
  virtual Status CancelRunningStatement() = 0;

  // ---- The administration lock (of the config's schema)

  // Takes it without waiting: Busy, naming `command` and the schema, when
  // another holds it (AdministrationBusy).
  virtual Status LockAdministration(const std::string& command,
                                    std::unique_ptr<AdministrationLock>* out) = 0;
  // Whether some process holds it now.
  virtual Status AdministrationLocked(bool* held) = 0;

  // ---- Building beside and switching (daemon/apply.h). The caller holds
  // the administration lock. A collection "<collection><suffix>" is built
  // through the store of a config naming it so (its own Open(kBuild) makes
  // it, Rebuild and the journal fill it).

  // Records `applying` (JSON, what the apply builds), alone among the
  // writers, with an empty journal: from the next batch on, every batch
  // journals its source changes (SourceRows::Journal).
  virtual Status MarkApplying(const std::string& applying) = 0;
  // Removes an unfinished apply's mark, the journal batches kept for it and
  // every __next collection of denormd's, alone among the writers (nothing
  // when no mark is recorded). *journal_rows (may be null): rows removed.
  virtual Status AbandonApply(uint64_t* journal_rows) = 0;
  // Removes every collection of denormd's whose name ends in `suffix` (what
  // a killed plan or apply built; collection names never end so). Another's
  // table of such a name stays.
  virtual Status DropBuiltCollections(const std::string& suffix) = 0;
  // Removes the reference-index rows and counters of every relation but
  // `kept` (stale rows of an earlier plan or a killed apply), or of the
  // relations `dropped` (that no model keeps any more).
  virtual Status RemoveRelationsExcept(const std::vector<RelationName>& kept) = 0;
  virtual Status RemoveRelations(const std::vector<RelationName>& dropped) = 0;
  // Counts "<collection><suffix>" against the live `collection`.
  virtual Status CompareBuilt(const std::string& collection, const std::string& suffix,
                              BuiltComparison* out) = 0;
  // The documents of `collection`, 0 when it does not exist.
  virtual Status CountDocuments(const std::string& collection, uint64_t* out) = 0;
  // In `txn` (a transaction of this store's kind, holding the writers' lock
  // exclusively; committed by the caller, and undone if it rolls back):
  // when the store's epoch is still `change.from_epoch`, moves it on by one,
  // replaces the rebuilt collections with the built ones (a reader sees the
  // old or the new, never a part), removes the dropped ones, records the
  // model and index fingerprint and removes `applying`; *switched says
  // whether it did (false: the epoch had moved, nothing changed).
  virtual Status SwitchModel(StoreTransaction& txn, const ModelSwitch& change,
                             bool* switched) = 0;
};

// Makes the store of a config (not opened yet), which must outlive it:
// connectors/postgres_admin.h (PostgresStores) and projections/memory_admin.h
// (MemoryStores). Commands that need the stores of several configs of one
// schema (apply's live, built and control stores) take one of these.
using StoreFactory = std::function<std::unique_ptr<StoreAdministration>(const Config& config)>;

// The errors every store words alike.
// `config` is not the model the store runs (`stored`), naming plan and apply.
Status StaleModelError(const Config& config, const StoredModel& stored);
// The reference index was built for other relations, naming rebuild.
Status StaleIndexError(const Config& config);
// RecordModel found the epoch moved from `epoch`.
Status ModelMovedError(const Config& config, uint64_t epoch);
// Another process holds the administration lock of `config`'s schema.
Status AdministrationBusy(const Config& config, const std::string& command);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_STORE_ADMIN_H_
