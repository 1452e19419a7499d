// PostgresStore: the Store on PostgreSQL, through libpqxx, and its
// administration (projections/store_admin.h): the connection, the schema and
// the model here (postgres_store.cc), status, prune, the administration lock
// and apply's tables in postgres_admin.h/.cc.
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
#include "projections/store_admin.h"

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

// The comment denormd puts on every table and index it creates: its mark of
// ownership. denormd uses and drops only relations that carry it; a schema
// holding relations of its names without it is refused (Open), except
// through Adopt.
inline constexpr const char* kOwnershipMark = "denormd";

class PostgresStore : public StoreAdministration {
 public:
  // Does not connect; Open() does.
  PostgresStore(const Config& config, std::string connection_string);
  ~PostgresStore() override;

  Status Begin(std::unique_ptr<StoreTransaction>* out) override;

  // Opening and the model (postgres_store.cc).
  using StoreAdministration::Open;
  Status Open(OpenMode mode) override;
  // Marks as denormd's the tables and indexes of denormd's names (its own,
  // and the config's collections) that exist in the schema without any
  // comment: a store created by a release before the mark of ownership.
  // Refuses (InvalidInput, naming it) unless `meta` has denormd's layout and
  // records an index fingerprint or epoch, or when a collection table lacks
  // the columns denormd gives it, or a relation carries another comment.
  // Creates nothing.
  Status Adopt(std::vector<std::string>* adopted) override;
  Status ReadModel(StoredModel* out) override;
  const StoredModel& stored_model() const override { return model_; }
  Status RecordModel() override;
  Status MarkIndexCurrent() override;
  // Cancels the statement the store's connection is running: it opens a
  // short connection of its own and asks the server to cancel.
  Status CancelRunningStatement() override;

  // Administration (postgres_admin.cc).
  Status Summarize(StoreSummary* out) override;
  // Prune's chunks skip the rows a batch has locked (FOR UPDATE SKIP
  // LOCKED): a lock row or counter removed is recreated by the next batch
  // that needs it; a tombstone updated meanwhile is not removed. Unlocked
  // lock rows and counters at zero go too.
  //
  // Lock rows go in chunks of at most kLockRowsPerChunk: a batch that needs
  // a row a chunk is removing waits for the chunk to commit and creates the
  // row again (PostgresWriteLocks::LockKeys), and its second phase waits only
  // PostgresWriteLocks::kBriefLockWaitMs before it retries. A chunk of 1,000
  // took 7 ms on an idle store of 300,000 rows; the soak's chunks of a
  // million held 259,000 rows for 1.2-1.7 s, and the batch that met them
  // stalled as long. The chunks commit without waiting for the WAL flush.
  static constexpr size_t kLockRowsPerChunk = 1000;
  Status Prune(const RetentionConfig& retention, size_t chunk_rows, PruneReport* report,
               const std::function<void(const PruneReport&)>& progress,
               const std::function<bool()>& stop) override;
  // A session advisory lock on a connection of its own
  // (PostgresAdministrationLock, postgres_admin.h).
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
  // The tables swapped (old dropped, new renamed with their indexes) in
  // `txn`, a transaction of a PostgresStore.
  Status SwitchModel(StoreTransaction& txn, const ModelSwitch& change, bool* switched) override;

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
  // A collection's table, schema-qualified and quoted.
  std::string Table(const std::string& collection) const;

  const Config& config_;
  const ChangeCapture capture_;
  const IndexCounting counting_;
  std::string connection_string_;
  struct Connection;  // wraps pqxx::connection: postgres_connection.h
  std::unique_ptr<Connection> connection_;
  std::atomic<int> backend_pid_{0};           // of connection_, for cancelling
  StoredModel model_;                         // as Open/RecordModel read it
  uint64_t epoch_ = 0;                        // transactions are fenced on it; 0 before Open
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_STORE_H_
