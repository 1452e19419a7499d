// The store behind the projection engine, split by role: the source rows,
// the reference index, the document tables, the stream ledger (positions and
// dead letters) and the write locks, declared here; and the bucket tables,
// the storage only bucket projections use, declared by the buckets module
// (projections/buckets/bucket_tables.h). A StoreTransaction hands out each
// role; a second implementation of one role (another sink for documents) may
// stand in front of a store's.
//
// Two stores, each with one object per role, in a file of its own, over the
// state its transaction shares:
//   PostgreSQL (the product; connectors/postgres_store.h): the roles in
//     connectors/postgres_source_rows.h, postgres_reference_index.h,
//     postgres_document_tables.h, postgres_bucket_tables.h,
//     postgres_stream_ledger.h and postgres_write_locks.h, over PostgresWork
//     (postgres_work.h: the server transaction, its deferred statements and
//     round trips); PostgresTransaction (postgres_transaction.h) owns them.
//   In process (tests and `denormd test`; projections/memory_store.h): the
//     roles in projections/memory_source_rows.h, memory_reference_index.h,
//     memory_document_tables.h, memory_bucket_tables.h,
//     memory_stream_ledger.h and memory_write_locks.h, over MemoryWork
//     (memory_work.h: the MemoryState, the undo of each write);
//     MemoryTransaction (memory_store.cc) owns them.
// The engine sees only these interfaces, so the same tests run against both.
// What commands do to a store as a whole (open it, its model, status, prune,
// apply's tables) is its administration: projections/store_admin.h.
//
// All work happens in a StoreTransaction. Its reads see the transaction's own
// writes. Nothing is visible to others until Commit(); a transaction that is
// destroyed without Commit() rolls back. Every method returns Transient for
// failures a retry of the whole batch can cure (lost connection, deadlock,
// serialization failure), Busy for a lock not granted within a brief wait
// (WriteLocks::Mode::kWaitBriefly), and Fatal otherwise; after any error the
// transaction must be abandoned.
//
// Not thread-safe: one thread uses a Store and its transaction at a time.
#ifndef DENORMD_PROJECTIONS_STORE_H_
#define DENORMD_PROJECTIONS_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "projections/entity.h"
#include "projections/relation.h"
#include "projections/stream.h"

namespace denormd {

// ---------------------------------------------------------------------------
// Source rows: the normalized entities, with their reference-index rows.

// One row of the reference index: the entity names `target` in `relation`,
// with its sort key for that relation's order (empty: by id).
struct ReferenceRow {
  const Relation* relation = nullptr;
  std::string target;
  std::string sort;
};

// An entity's new record, and how its reference-index rows change: the rows
// it gains and the rows it loses (an unchanged row is in neither, and costs
// no write). With `replace_all` every stored row of the entity is removed
// first and `added` holds all of its rows (reindexing, where the stored rows
// are not known).
struct EntityWrite {
  EntityRecord record;
  std::vector<ReferenceRow> added;
  std::vector<ReferenceRow> removed;
  bool replace_all = false;
};

class SourceRows {
 public:
  virtual ~SourceRows() = default;
  // Loads the stored records (live or tombstone) of those keys that exist.
  virtual Status LoadEntities(const std::vector<EntityKey>& keys,
                              std::vector<EntityRecord>* out) = 0;
  // A hint: LoadEntities will be asked for these keys in this transaction.
  // A store that queues statements may read them with its next one; the
  // answers are the same either way (BatchApplier::ApplyInTransaction reads
  // ahead what the projections will read).
  virtual void ReadAhead(const std::vector<EntityKey>& keys) { (void)keys; }
  // Writes entity records with their reference rows (and keeps the index's
  // per-target counts equal to its rows).
  virtual Status WriteEntities(const std::vector<EntityWrite>& writes) = 0;
  // Live entity ids of `type` greater than `after`, ascending, at most `limit`.
  virtual Status ListEntityIds(const std::string& type, const std::string& after, size_t limit,
                               std::vector<std::string>* out) = 0;

  // The change journal, kept only while `denormd apply` builds a new
  // configuration beside the running one (daemon/apply.h): every batch
  // records the source changes it writes (before and after), and the apply
  // takes them to bring what it builds up to date. Stores without `apply`
  // keep no journal: Journal is a no-op and TakeJournal finds nothing.
  struct JournaledChange {
    EntityKey key;
    EntityState before;
    EntityState after;
  };
  virtual Status Journal(const std::vector<EntityChange>& /*changes*/) { return Status::Ok(); }
  // Removes and returns up to `limit` journaled changes (0: all), in the
  // order they were recorded. They come back if this transaction rolls back.
  virtual Status TakeJournal(size_t /*limit*/, std::vector<JournaledChange>* out) {
    out->clear();
    return Status::Ok();
  }
};

// ---------------------------------------------------------------------------
// The reference index, read like a LevelDB iterator: one ordered scan
// primitive; count, first-N, "around a key" and "everything" are built on it
// (projections/reference_index.h).

// A referrer's place in its target's order: (sort key, id), compared as bytes.
struct IndexKey {
  std::string sort;
  std::string id;
  bool operator<(const IndexKey& o) const { return std::tie(sort, id) < std::tie(o.sort, o.id); }
  bool operator<=(const IndexKey& o) const { return !(o < *this); }
  bool operator==(const IndexKey& o) const { return sort == o.sort && id == o.id; }
};

// A referring entity found through the index: `target` is the id it names.
// Scan returns referrers in no particular order; GroupByTarget
// (reference_index.h) sorts them.
struct Referrer {
  std::string target;
  std::string sort;     // the relation's sort key; referrers order by (sort, id)
  EntityRecord entity;  // entity.data is null when read with Read::kKeys

  IndexKey key() const { return {sort, entity.key.id}; }
};

// One contiguous range of one target's referrers.
//   forward:  the referrers at or after `from` (from the first when absent),
//             ascending
//   backward: the referrers before `from` (from the last when absent),
//             descending
// At most `limit` of them (0: all).
struct IndexRange {
  std::string target;
  std::optional<IndexKey> from;
  bool backward = false;
  uint64_t limit = 0;
};

class ReferenceIndex {
 public:
  enum class Read { kKeys, kKeysAndData };
  virtual ~ReferenceIndex() = default;
  // The referrers (live entities of relation.entity_type()) of each range,
  // in any order. kKeysAndData loads each referrer's record too.
  virtual Status Scan(const Relation& relation, const std::vector<IndexRange>& ranges, Read read,
                      std::vector<Referrer>* out) = 0;
  // A hint: Scan will be asked exactly this in this transaction (as
  // SourceRows::ReadAhead).
  virtual void ReadScanAhead(const Relation& relation, const std::vector<IndexRange>& ranges,
                             Read read) {
    (void)relation;
    (void)ranges;
    (void)read;
  }
  // A hint: Count will be asked for whole ranges of these targets of
  // `relation` in this transaction (as SourceRows::ReadAhead).
  virtual void ReadCountsAhead(const Relation& relation, const std::vector<std::string>& targets) {
    (void)relation;
    (void)targets;
  }
  // How many referrers each range holds (`backward` and `limit` ignored),
  // keyed by target (each target at most once per call). Counted by the store
  // so that no keys travel: ranges without `from` are read from the counts it
  // keeps per target, one row each. Not asked of a relation that is not
  // Relation::counted (a link's sides and pairs): a store keeps no counts
  // of those.
  virtual Status Count(const Relation& relation, const std::vector<IndexRange>& ranges,
                       std::map<std::string, uint64_t>* out) = 0;
  // Distinct targets named in `relation` by live entities, greater than
  // `after`, ascending, at most `limit`.
  virtual Status ListTargets(const Relation& relation, const std::string& after, size_t limit,
                             std::vector<std::string>* out) = 0;
  // The stored rows of these entities, whatever their relation (for verify):
  // (entity, relation name, target, sort key).
  struct StoredRow {
    EntityKey entity;
    std::string relation;
    std::string target;
    std::string sort;
  };
  virtual Status RowsOf(const std::vector<EntityKey>& entities, std::vector<StoredRow>* out) = 0;
  // Sets every per-target count to the number of its rows, and to zero
  // those of relations not counted (reindexing repairs counters that drifted, and
  // those an older denormd kept; a whole-index pass).
  virtual Status RecountTargets() = 0;

  // Index rows written apart from their owner's record: the rows of kLinked
  // relations (projections/linked_rows.h), which the owner's own data does
  // not name. A row added that exists, or removed that does not, changes
  // nothing (and no counter), so a writer may add and remove without
  // reading first; *written (when not null) receives the rows that did
  // change. An owner's `added` and `removed` are disjoint.
  struct OwnedRows {
    EntityKey owner;
    std::vector<ReferenceRow> added;
    std::vector<ReferenceRow> removed;
  };
  struct WrittenRow {
    const Relation* relation = nullptr;
    std::string target;
    std::string id;  // the owner's
    bool added = false;  // inserted; else deleted
  };
  virtual Status WriteRows(const std::vector<OwnedRows>& writes,
                           std::vector<WrittenRow>* written) = 0;
};

// ---------------------------------------------------------------------------
// Document tables: one table per collection; each row belongs to one
// projection (several projections may share a collection).

// Where a bucket document sits in its group (bucket projections only),
// kept in columns next to the document: every document table has them, and
// DocumentTables writes and reads them with the document. What they mean to
// bucket projections, and the operations only those use, are in
// projections/buckets/bucket_tables.h.
struct BucketMeta {
  uint64_t number = 0;         // the n of its id "<group>:<n>"; never changes
  int64_t seq = 0;             // readers page a group by ascending seq
  std::optional<IndexKey> lo;  // its first member's key (stable layout)
  uint64_t members = 0;        // how many members it holds
  // Its members' keys, in order (`members` of them), as PackIndexKeys
  // (projections/buckets/bucket_tables.h) writes them, so that a batch splices the bucket without reading its
  // range of the reference index. Kept packed: a batch holds thousands of
  // buckets, and a key unpacked costs several times its bytes. None when
  // unknown (the packed layout, or a bucket written before the column
  // existed); readers then scan the index.
  std::optional<std::string> member_keys;
};

// A projection document as stored: table row (id, doc, pk), and for a
// bucket its place in the group.
struct DocumentRow {
  std::string id;
  std::optional<std::string> pk;
  std::string json;
  std::optional<BucketMeta> bucket;
};

// Change capture: in a collection the change feed publishes (the store's
// own setting), every row a method below actually writes or deletes is also
// captured in the change outbox (projections/outbox.h), in the same
// transaction, with the transaction's change source: its new document, or
// none for a delete; a document whose partition key changed is also captured
// as deleted under its old pk. Rows left as they were capture nothing.
class DocumentTables {
 public:
  virtual ~DocumentTables() = default;
  // Upserts documents of `projection` (with their bucket metadata); rows
  // equal to the stored ones are not rewritten. Adds the rows actually
  // written to *written (and deleted ones to *deleted below), which must
  // outlive the transaction: a store may send a write later, with the
  // transaction's next read or its commit, and count it then.
  virtual Status Upsert(const ProjectionConfig& projection, const std::vector<DocumentRow>& rows,
                        uint64_t* written) = 0;
  virtual Status Delete(const ProjectionConfig& projection, const std::vector<std::string>& ids,
                        uint64_t* deleted) = 0;
  // Deletes the documents of `projection` whose pk is one of `pks`, except
  // those with an id in `keep`.
  virtual Status DeleteByPkExcept(const ProjectionConfig& projection,
                                  const std::vector<std::string>& pks,
                                  const std::vector<std::string>& keep, uint64_t* deleted) = 0;
  // Stored documents of `projection` with the given ids.
  virtual Status Load(const ProjectionConfig& projection, const std::vector<std::string>& ids,
                      std::vector<DocumentRow>* out) = 0;
  // A hint: Load will be asked for these ids of `projection` in this
  // transaction (as SourceRows::ReadAhead).
  virtual void ReadAhead(const ProjectionConfig& projection, const std::vector<std::string>& ids) {
    (void)projection;
    (void)ids;
  }
  // Stored documents of `projection` whose pk is one of `pks`.
  virtual Status LoadByPk(const ProjectionConfig& projection, const std::vector<std::string>& pks,
                          std::vector<DocumentRow>* out) = 0;
  // Ids (`by_pk` false) or distinct pks (true) of stored documents of
  // `projection` greater than `after`, ascending, at most `limit`.
  virtual Status ListKeys(const ProjectionConfig& projection, bool by_pk, const std::string& after,
                          size_t limit, std::vector<std::string>* out) = 0;
};

// The bucket tables: the operations on these tables that only bucket
// projections use. Declared by the buckets module
// (projections/buckets/bucket_tables.h), which builds on this header; callers
// include that header.
class BucketTables;

// ---------------------------------------------------------------------------
// The stream ledger: where each stream is, and what could not be applied.

// What the changes of one entity type's field cost over one hour, as the
// daemon observes them (`denormd status`, `denormd advise`).
struct FanOutStat {
  std::string type;
  std::string field;          // a top-level field, "(created)" or "(deleted)"
  uint64_t changes = 0;       // changes of it
  uint64_t documents = 0;     // the documents they made batches recompute
  uint64_t max_documents = 0; // the most one change made
  std::string max_id;         // the entity of that change
  int64_t hour = 0;           // on read: the hour's start, Unix seconds

  // Adds `other`'s changes and documents; keeps the larger of the two
  // largest changes (this one's on a tie).
  void Add(const FanOutStat& other) {
    changes += other.changes;
    documents += other.documents;
    if (max_id.empty() || other.max_documents > max_documents) {
      max_documents = other.max_documents;
      max_id = other.max_id;
    }
  }
};

class StreamLedger {
 public:
  virtual ~StreamLedger() = default;
  // Adds `stats` to those of the current hour (summing changes and
  // documents, keeping the largest change). A store without statistics
  // keeps none.
  virtual Status RecordFanOuts(const std::vector<FanOutStat>& /*stats*/) { return Status::Ok(); }
  // The statistics of the hours that began at most `within_seconds` ago,
  // newest hour first.
  virtual Status ReadFanOuts(uint64_t /*within_seconds*/, std::vector<FanOutStat>* out) {
    out->clear();
    return Status::Ok();
  }
  // Every row of `source` (all its partitions, every lane's).
  virtual Status LoadPositions(const std::string& source, std::vector<StoredPosition>* out) = 0;
  // Fails with Conflict when a fenced stream moved (PositionUpdate).
  virtual Status SavePositions(const std::vector<PositionUpdate>& updates) = 0;
  // Adds the rows of `rows` (counters zero) whose (stream, lane) has none;
  // a row that exists is left as it is (Lanes::RowsToAdd).
  virtual Status AddPositionRows(const std::vector<StoredPosition>& rows) = 0;
  virtual Status AddDeadLetters(const std::vector<DeadLetter>& letters) = 0;
};

// ---------------------------------------------------------------------------
// Write locks (see the protocol at BatchApplier::Apply).

class WriteLocks {
 public:
  enum class Mode { kWait, kWaitBriefly };
  virtual ~WriteLocks() = default;
  // Joins the writers of the schema, first thing in the transaction, for
  // work that may touch any part of the model: shared (a rebuild or reindex
  // page, `apply`'s catch-up: beside every batch, but never beside a batch
  // retried alone) or exclusive (`apply`'s switch, a recount: alone). Blocks
  // until granted.
  virtual Status LockWriters(bool exclusive) = 0;
  // Joins the writers as a batch whose lock keys all lie in `parts` (names
  // of PartOfType; empty: it takes no key): beside every other writer, or
  // `alone` in its parts (a batch that could not get its keys without
  // waiting, retried): then no other batch touching one of `parts` and no
  // LockWriters writer runs beside it, while batches of other parts do, and
  // it may wait for its keys without deadlock (BatchApplier::Apply). Blocks
  // until granted. Every caller passes the parts of one model (one epoch).
  virtual Status LockWritersOf(const std::vector<std::string>& parts, bool alone) = 0;
  // Takes transaction-scoped exclusive locks on opaque keys, in an order of
  // the store's own (the same for every caller). kWait blocks until all are
  // granted; kWaitBriefly fails with Busy if any is still held by another
  // transaction after a brief wait (milliseconds: long enough for the
  // store's own upkeep, a prune's chunk, to let go; far shorter than a batch
  // holds its keys). Re-entrant; released at commit or rollback.
  virtual Status LockKeys(const std::vector<std::string>& keys, Mode mode) = 0;
};

// Lock keys: an entity, and a bucket group of a projection.
std::string EntityLockKey(const std::string& type, const std::string& id);
std::string GroupLockKey(const std::string& projection, const std::string& group);

// ---------------------------------------------------------------------------

class StoreTransaction {
 public:
  virtual ~StoreTransaction() = default;
  virtual SourceRows& source() = 0;
  virtual ReferenceIndex& index() = 0;
  virtual DocumentTables& documents() = 0;
  virtual BucketTables& buckets() = 0;
  virtual StreamLedger& ledger() = 0;
  virtual WriteLocks& locks() = 0;
  // What the document changes of this transaction are attributed to in the
  // change outbox: the stream positions a batch reached
  // ("<source>/<partition>@<position>", comma separated), or a maintenance
  // command's name. Set before writing documents; "" until set.
  virtual void SetChangeSource(const std::string& source) = 0;
  virtual Status Commit() = 0;
  // Makes this transaction a read-only view of one snapshot of the store,
  // however long it runs and whatever commits meanwhile (verify reads the
  // whole store in it). Called first, before any read. An in-process store
  // that runs one transaction at a time already is one.
  virtual Status PinReadSnapshot() { return Status::Ok(); }
  // Round trips to the store server so far (begin, statements, commit), and
  // the SQL statements they sent (a multi-statement query of N counts N),
  // for the cost figures; 0 for an in-process store.
  virtual uint64_t round_trips() const { return 0; }
  virtual uint64_t statements() const { return 0; }
};

class Store {
 public:
  virtual ~Store() = default;
  virtual Status Begin(std::unique_ptr<StoreTransaction>* out) = 0;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_STORE_H_
