// The store behind the projection engine: source entities, the reference
// index, projection documents, consumer positions and dead letters.
//
// Two implementations: connectors/postgres_store (the product) and
// projections/memory_store (in-process, for unit tests of the language). The
// engine sees only these interfaces, so the same tests run against both.
//
// All work happens in a StoreTransaction. Its reads see the transaction's own
// writes. Nothing is visible to others until Commit(); a transaction that is
// destroyed without Commit() rolls back. Every method returns Transient for
// failures a retry of the whole batch can cure (lost connection, deadlock,
// serialization failure) and Fatal otherwise; after any error the transaction
// must be abandoned.
//
// Not thread-safe: one thread uses a Store and its transaction at a time.
#ifndef DENORMD_PROJECTIONS_STORE_H_
#define DENORMD_PROJECTIONS_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "projections/event.h"
#include "projections/json.h"

namespace denormd {

// The stored state of an entity: live, or a tombstone left by a delete.
struct EntityRecord {
  EntityKey key;
  std::optional<uint64_t> version;
  bool deleted = false;
  JsonPtr data;  // null when deleted
};

// One row of the reference index: entity `id` of `type` names `target` in
// relation `relation` (see Relation in projection_plan.h), with its sort key
// for that relation's order (empty: by id).
struct ReferenceRow {
  std::string relation;
  std::string target;
  std::string sort;
};

struct EntityWrite {
  EntityRecord record;
  std::vector<ReferenceRow> references;  // replaces the entity's previous rows
};

// A referring entity found through the index: `target` is the id it names.
struct Referrer {
  std::string target;
  std::string sort;     // the relation's sort key; referrers order by (sort, id)
  EntityRecord entity;  // entity.data is null when loaded by FindReferrers
};

// A projection document as stored: table row (id, doc, pk) owned by `projection`.
struct DocumentRow {
  std::string id;
  std::optional<std::string> pk;
  std::string json;
};

// Per-stream progress recorded with a batch.
struct PositionUpdate {
  SourcePosition at;       // the last event of the batch in this stream
  // When set, the position this batch started from (-1: none stored yet).
  // SavePositions fails with Conflict if the stored position differs: another
  // consumer applied events of this stream meanwhile (a zombie instance after
  // a rebalance, or a second replay of one log).
  std::optional<int64_t> expected_previous;
  uint64_t applied = 0;    // events applied (not stale, not dead)
  uint64_t stale = 0;      // events skipped as stale
  uint64_t dead = 0;       // events sent to dead letters
};

struct StoredPosition {
  SourcePosition at;
  uint64_t applied = 0;
  uint64_t stale = 0;
  uint64_t dead = 0;
};

struct DeadLetter {
  SourcePosition at;
  std::string raw;
  std::string reason;
};

class StoreTransaction {
 public:
  virtual ~StoreTransaction() = default;

  // Joins the writers of the schema: shared (every batch and rebuild page,
  // first thing in the transaction) or exclusive (a batch that could not get
  // its locks without waiting, retried alone). Blocks until granted.
  virtual Status LockWriters(bool exclusive) = 0;

  // Takes transaction-scoped exclusive locks on opaque keys, in an order of
  // the store's own (the same for every caller). kWait blocks until all are
  // granted; kNoWait fails with Busy at once if any is held by another
  // transaction. Re-entrant; released at commit or rollback.
  enum class LockMode { kWait, kNoWait };
  virtual Status LockKeys(const std::vector<std::string>& keys, LockMode mode) = 0;

  // Loads the stored records (live or tombstone) of those keys that exist.
  virtual Status LoadEntities(const std::vector<EntityKey>& keys,
                              std::vector<EntityRecord>* out) = 0;
  // Writes entity records with their reference rows.
  virtual Status WriteEntities(const std::vector<EntityWrite>& writes) = 0;

  // Live entities of `type` that name any of `targets` in `relation`.
  // FindReferrers returns keys only; LoadReferrers data too. Any order.
  virtual Status FindReferrers(const std::string& type, const std::string& relation,
                               const std::vector<std::string>& targets,
                               std::vector<Referrer>* out) = 0;
  virtual Status LoadReferrers(const std::string& type, const std::string& relation,
                               const std::vector<std::string>& targets,
                               std::vector<Referrer>* out) = 0;
  // How many entities name each target (targets with none are left out).
  virtual Status CountReferrers(const std::string& type, const std::string& relation,
                                const std::vector<std::string>& targets,
                                std::map<std::string, uint64_t>* out) = 0;
  // The first `limit` referrers of each target in (sort, id) order, with data.
  virtual Status LoadFirstReferrers(const std::string& type, const std::string& relation,
                                    const std::vector<std::string>& targets, uint64_t limit,
                                    std::vector<Referrer>* out) = 0;
  // Where a bucket group is read from: its changed members start at
  // (sort, id), and `before` more members preceding that are wanted too.
  struct ReferrerBound {
    std::string sort;
    std::string id;
    uint64_t before = 0;
  };
  // For each target, how many of its referrers order at or after its bound.
  virtual Status CountReferrersFrom(const std::string& type, const std::string& relation,
                                    const std::map<std::string, ReferrerBound>& bounds,
                                    std::map<std::string, uint64_t>* out) = 0;
  // For each target, the `before` referrers just preceding its bound and the
  // referrers from the bound on (at most `limit` of them; 0 = all), with
  // data; any order.
  virtual Status LoadReferrersAround(const std::string& type, const std::string& relation,
                                     const std::map<std::string, ReferrerBound>& bounds,
                                     uint64_t limit, std::vector<Referrer>* out) = 0;
  // The same referrers, keys only (entity.data null): an index-only read.
  virtual Status FindReferrersAround(const std::string& type, const std::string& relation,
                                     const std::map<std::string, ReferrerBound>& bounds,
                                     uint64_t limit, std::vector<Referrer>* out) = 0;

  // Live entity ids of `type` greater than `after`, ascending, at most `limit`.
  virtual Status ListEntityIds(const std::string& type, const std::string& after, size_t limit,
                               std::vector<std::string>* out) = 0;
  // Distinct targets named in `relation` by live entities of `type`, greater
  // than `after`, ascending, at most `limit`.
  virtual Status ListReferenceTargets(const std::string& type, const std::string& relation,
                                      const std::string& after, size_t limit,
                                      std::vector<std::string>* out) = 0;

  // Upserts documents of `projection` into `collection`; rows equal to the
  // stored ones are not rewritten. *written counts rows actually written.
  virtual Status UpsertDocuments(const std::string& collection, const std::string& projection,
                                 const std::vector<DocumentRow>& rows, uint64_t* written) = 0;
  virtual Status DeleteDocuments(const std::string& collection, const std::string& projection,
                                 const std::vector<std::string>& ids, uint64_t* deleted) = 0;
  // Deletes the documents of `projection` whose pk is one of `pks`, except
  // those with an id in `keep`.
  virtual Status DeleteDocumentsExcept(const std::string& collection, const std::string& projection,
                                       const std::vector<std::string>& pks,
                                       const std::vector<std::string>& keep,
                                       uint64_t* deleted) = 0;
  // Stored documents of `projection` with the given ids.
  virtual Status LoadDocuments(const std::string& collection, const std::string& projection,
                               const std::vector<std::string>& ids,
                               std::vector<DocumentRow>* out) = 0;
  // Stored documents of `projection` whose pk is one of `pks`.
  virtual Status LoadDocumentsByPk(const std::string& collection, const std::string& projection,
                                   const std::vector<std::string>& pks,
                                   std::vector<DocumentRow>* out) = 0;
  // Ids (entity projections) or distinct pks (bucket projections: `by_pk`) of
  // stored documents of `projection` greater than `after`, ascending.
  virtual Status ListDocumentKeys(const std::string& collection, const std::string& projection,
                                  bool by_pk, const std::string& after, size_t limit,
                                  std::vector<std::string>* out) = 0;

  virtual Status LoadPositions(const std::string& source, std::vector<StoredPosition>* out) = 0;
  virtual Status SavePositions(const std::vector<PositionUpdate>& updates) = 0;
  virtual Status AddDeadLetters(const std::vector<DeadLetter>& letters) = 0;

  virtual Status Commit() = 0;
};

class Store {
 public:
  virtual ~Store() = default;
  virtual Status Begin(std::unique_ptr<StoreTransaction>* out) = 0;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_STORE_H_
