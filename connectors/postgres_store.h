// PostgresStore: the Store on PostgreSQL, through libpqxx.
//
// Tables, all in the configured schema (docs/architecture.md, "Tables"):
//   entities     (type, id, version, deleted, data jsonb)   the normalized source
//   refs         (type, field, target, sort, id)            the reference index
//   ref_counts   (type, field, target, count)               referrers per target
//   positions    (source, partition, position, counters)    consumer positions
//   dead_letters (seq, source, partition, position, raw, reason, received_at)
//   locks        (key)                                      rows locked by batches
//   writers      ()                                         table-locked by batches
//   meta         (key, value)                               the index fingerprint, the
//                                                           model, its epoch
//   apply_journal (seq, type, id, before, after)            changes during an apply
//   <collection> (id, doc jsonb, pk, projection)            one per collection
//   outbox       (seq, txid, collection, id, pk, doc, source, created_at)
//                                                           the change feed's outbox
//   feed_state   (relay, sequence, cursor, published_at)   what the relay published
//
// Transactions (postgres_transaction.h) serve each role of projections/store.h
// with an object of its own, in a file of its own (postgres_source_rows.h,
// postgres_reference_index.h, postgres_document_tables.h,
// postgres_bucket_tables.h, postgres_stream_ledger.h, postgres_write_locks.h)
// over the transaction's shared PostgresWork (postgres_work.h), and run every
// bulk read and write as one statement with the rows passed as a single JSON
// or array parameter.
//
// Errors: a lost connection, deadlock, serialization failure, or server
// shutdown is Transient (the next Begin() reconnects); anything else is Fatal.
// Not thread-safe: one connection, used by one thread.
#ifndef DENORMD_CONNECTORS_POSTGRES_STORE_H_
#define DENORMD_CONNECTORS_POSTGRES_STORE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "connectors/postgres_transaction.h"
#include "projections/outbox.h"
#include "projections/store.h"

namespace denormd {

// The connection string to use: $DENORMD_POSTGRES if set, else the config's.
std::string PostgresConnectionString(const Config& config);

// Ok when libpq can use `conninfo` (a URI or key=value string): its syntax and
// option names, each port a number up to 65535, sslmode one of libpq's. Else
// InvalidInput (waiting will not help) naming the problem, without any secret
// of the string.
Status CheckConnectionString(const std::string& conninfo);

// `conninfo` with denormd's connection defaults added where it does not set
// them itself: connect_timeout (store.connect_timeout_s), TCP keepalives and
// tcp_user_timeout, so that a server that vanishes without closing the
// connection (a crash of its machine, a network partition: packets lost, not
// refused) is noticed within about 25 s, whether the connection was idle
// (keepalives: 10 s, then 3 probes 5 s apart) or waiting for its data to be
// acknowledged (tcp_user_timeout 25 s).
std::string WithConnectionDefaults(const std::string& conninfo, const StoreConfig& store);

// The session settings every connection of denormd makes first (the
// store's, the relay's, the administration lock's): statement_timeout and
// lock_timeout from the config, standard_conforming_strings = on (the SQL
// literals denormd builds double quotes only, as that setting reads them),
// and the server's TCP keepalives and tcp_user_timeout as the client's (a
// backend whose client vanished ends, and its locks with it).
std::string SessionSettingsSql(const StoreConfig& store);

// The one lock of everything that changes a schema's model or its index:
// `apply`, `rebuild` and `plan`'s scratch tables. A session advisory lock,
// held on a connection of its own that is never reopened: when that
// connection ends, the lock is gone and Check() says so (the command must
// then abort: another may hold the lock by now). Released on destruction.
// Not thread-safe.
class AdministrationLock {
 public:
  // Takes the lock of `config`'s schema without waiting: Busy, naming
  // `command` and the schema, when another process holds it.
  static Status Acquire(const Config& config, const std::string& conninfo,
                        const std::string& command, std::unique_ptr<AdministrationLock>* out);
  ~AdministrationLock();

  // Ok while the lock is held; Fatal ("lost the lock ...") once its
  // connection ended.
  Status Check();

  // Whether some process holds `config`'s lock now (taken and released at
  // once when free).
  static Status IsHeld(const Config& config, const std::string& conninfo, bool* held);

  // The advisory lock's key (pg_locks: classid the high 32 bits, objid the
  // low 32) for `schema`.
  static int64_t Key(const std::string& schema);

 private:
  AdministrationLock() = default;
  struct Connection;
  std::unique_ptr<Connection> connection_;
  std::string schema_;
};

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
  uint64_t tombstones = 0;    // entities rows of deletes older than the horizon
  uint64_t dead_letters = 0;  // by age and beyond the count cap
  uint64_t lock_rows = 0;     // locks rows no batch held
  uint64_t zero_counts = 0;   // ref_counts rows at 0
  // An `applying` mark no apply holds the lock for (a killed apply's) was
  // removed, with its journal and its __next tables.
  bool stale_apply_cleared = false;
  uint64_t stale_journal_rows = 0;  // the journal rows removed with it
  uint64_t total() const { return tombstones + dead_letters + lock_rows + zero_counts; }
};

// The configuration model a store runs (meta rows): what `denormd apply`
// (or the first start) recorded.
struct StoredModel {
  uint64_t epoch = 0;       // 1 at the first start, +1 per change of the model
  std::string fingerprint;  // ModelFingerprint of the model
  std::string yaml;         // Config::model_yaml
  std::string applying;     // "" or what an unfinished apply recorded (JSON)
};

// The comment denormd puts on every table and index it creates: its mark of
// ownership. denormd uses and drops only relations that carry it; a schema
// holding relations of its names without it is refused (Open), except
// through Adopt.
inline constexpr const char* kOwnershipMark = "denormd";

class PostgresStore : public Store {
 public:
  // Does not connect; Open() does.
  PostgresStore(const Config& config, std::string connection_string);
  ~PostgresStore() override;

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
    // (which then records the model), and the tables `apply` builds.
    kBuild,
  };
  // Connects and creates the schema and tables that do not exist yet
  // (idempotent; safe with several instances starting at once) as `mode`
  // says, and records the config's model when the store has none. The
  // stored model is then in stored_model(). Every transaction begun
  // afterwards is fenced on the stored epoch (StaleConfig once it moves).
  Status Open(OpenMode mode = OpenMode::kRunsThisModel);

  // Marks as denormd's the tables and indexes of denormd's names (its own,
  // and the config's collections) that exist in the schema without any
  // comment: a store created by a release before the mark of ownership.
  // Refuses (InvalidInput, naming it) unless `meta` has denormd's layout and
  // records an index fingerprint or epoch, or when a collection table lacks
  // the columns denormd gives it, or a relation carries another comment.
  // Creates nothing; `adopted` (may be null) gets the names marked.
  Status Adopt(std::vector<std::string>* adopted);

  // Reads the stored model afresh (not the one Open saw).
  Status ReadModel(StoredModel* out);
  // The model Open (or RecordModel) read.
  const StoredModel& stored_model() const { return model_; }
  // Records the config's model as the one the store runs (after rebuild);
  // the epoch moves when the model changed, so running instances reload.
  Status RecordModel();

  // Records that the reference index now matches the config (after rebuild).
  Status MarkIndexCurrent();

  Status Begin(std::unique_ptr<StoreTransaction>* out) override;

  Status Summarize(StoreSummary* out);

  // Cancels the statement the store's connection is running, if any (a batch
  // stuck behind a lock or a hung server): the batch then fails and rolls
  // back. Thread-safe: meant for another thread (a stop request); it opens a
  // short connection of its own and asks the server to cancel.
  Status CancelRunningStatement();

  // Removes the state `retention` says is no longer needed (see
  // RetentionConfig): tombstones past the horizon, old dead letters and those
  // beyond the cap, lock rows no transaction holds, counters at zero. Works in
  // chunks of `chunk_rows` (lock rows: of kLockRowsPerChunk), each its own
  // short transaction that skips rows a batch has locked, so it is safe beside
  // running instances (a lock row or counter removed is recreated by the next
  // batch that needs it; a tombstone updated meanwhile is not removed).
  // `progress` (may be empty) is told the
  // totals after every chunk; `stop` (may be empty) is asked before every
  // chunk and ends the prune early, with what was removed so far kept.
  //
  // Lock rows go in chunks of a million whatever `chunk_rows` says: a batch
  // that finds a lock row it remembered gone retries and forgets every row it
  // remembered (PostgresWriteLocks::LockKeys), and each chunk removes rows
  // across the whole key space a batch's keys spread over. In chunks of
  // 10,000 a batch running beside the prune retried once per chunk it met
  // (the soak: up to four retries in a row, 3 s of backoff, per prune); in one
  // chunk it retries once.
  static constexpr size_t kLockRowsPerChunk = 1000000;
  Status Prune(const RetentionConfig& retention, size_t chunk_rows, PruneReport* report,
               const std::function<void(const PruneReport&)>& progress,
               const std::function<bool()>& stop);

  // When the store records `applying` and no apply holds the
  // administration lock (the apply was killed), removes the mark, the journal
  // batches kept writing for it and its own __next tables, under the lock;
  // Prune does this too. *cleared (may be null) says whether it did,
  // *journal_rows how many journal rows went.
  Status ClearStaleApply(bool* cleared, uint64_t* journal_rows);

  // Runs one SQL statement outside the engine (tests, tools). Returns rows as
  // text, tab-separated.
  Status Execute(const std::string& sql, std::vector<std::string>* rows = nullptr);

  const std::string& schema() const { return config_.store.schema; }

 private:
  Status Connect();
  Status CreateTables(bool with_collections);
  // The tables (false) and indexes (true) CreateTables makes, unquoted.
  std::vector<std::pair<std::string, bool>> OwnedRelations(
      const std::vector<std::string>& collections) const;
  Status ForeignTablesError(const std::vector<std::string>& foreign, bool older_denormd) const;
  Status StaleModelError() const;
  Status ProvisionLockRows(const std::string& key_array);

  const Config& config_;
  const ChangeCapture capture_;
  std::string connection_string_;
  struct Connection;  // wraps pqxx::connection, kept out of this header
  std::unique_ptr<Connection> connection_;
  std::unique_ptr<Connection> provisioner_;  // autocommit, for lock rows
  std::atomic<int> backend_pid_{0};           // of connection_, for cancelling
  StoredModel model_;                         // as Open/RecordModel read it
  uint64_t epoch_ = 0;                        // transactions are fenced on it; 0 before Open
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_STORE_H_
