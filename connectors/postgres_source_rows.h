// PostgresSourceRows: the SourceRows of one PostgresTransaction, over the
// tables entities (the normalized records: type, id, version, deleted,
// data), refs and ref_counts (an entity's index rows change in the
// statement that writes it; postgres_reference_index.h) and apply_journal
// (the source changes journaled while `denormd apply` builds).
//
// Entity writes and the journal are deferred (PostgresWork, "Round
// trips"); until they are sent, the records written are served from
// memory, which is what a read would return: their rows stay locked until
// the transaction ends.
//
// Runs through the transaction's PostgresWork, which must outlive it. Not
// thread-safe.
#ifndef DENORMD_CONNECTORS_POSTGRES_SOURCE_ROWS_H_
#define DENORMD_CONNECTORS_POSTGRES_SOURCE_ROWS_H_

#include <map>
#include <string>
#include <vector>

#include "connectors/postgres_read_ahead.h"
#include "projections/store.h"

namespace denormd {

class PostgresWork;

class PostgresSourceRows : public SourceRows {
 public:
  explicit PostgresSourceRows(PostgresWork& work) : work_(work) {}

  // Answered from rows read ahead (or by an earlier load) when every key
  // not written here was (postgres_read_ahead.h).
  Status LoadEntities(const std::vector<EntityKey>& keys,
                      std::vector<EntityRecord>* out) override;
  void ReadAhead(const std::vector<EntityKey>& keys) override;
  Status WriteEntities(const std::vector<EntityWrite>& writes) override;
  Status ListEntityIds(const std::string& type, const std::string& after, size_t limit,
                       std::vector<std::string>* out) override;
  // Journals only while an apply builds, as the writers' statement found
  // (PostgresWork::Applying).
  Status Journal(const std::vector<EntityChange>& changes) override;
  Status TakeJournal(size_t limit, std::vector<JournaledChange>* out) override;

 private:
  std::string LoadSql() const;

  PostgresWork& work_;
  std::map<EntityKey, EntityRecord> written_;  // by WriteEntities (LoadEntities)
  // Rows read ahead or loaded, at PostgresWork::index_writes (entity
  // writes count there too).
  ReadAheadRows<EntityKey, EntityRecord> read_;
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_SOURCE_ROWS_H_
