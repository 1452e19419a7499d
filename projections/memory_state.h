// MemoryState: what a MemoryStore (memory_store.h) holds, written in place by
// its transactions (through MemoryWork, memory_work.h) and read by tests and
// `denormd test`. Besides the store's content it counts what the store did,
// for tests that bound what a change costs. Not thread-safe.
#ifndef DENORMD_PROJECTIONS_MEMORY_STATE_H_
#define DENORMD_PROJECTIONS_MEMORY_STATE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/clock.h"
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
  // Of those, the rows read with their referrer's data, ever (idem).
  uint64_t referrers_loaded = 0;
  // Entity records loaded, and index rows inserted or deleted, ever (idem).
  uint64_t entities_loaded = 0;
  uint64_t index_rows_written = 0;
  // (source, partition, lane) -> the row.
  std::map<std::tuple<std::string, int32_t, LaneKey>, StoredPosition> positions;
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

  // Appends one document change to the outbox: the next seq, captured now
  // (`doc` absent: the document was deleted). A batch (MemoryWork::Capture)
  // and apply's switch (MemoryAdministration) capture through it.
  void AppendToOutbox(const std::string& collection, const std::string& id,
                      const std::optional<std::string>& pk,
                      const std::optional<std::string>& doc, const std::string& source) {
    OutboxRow row;
    row.seq = ++outbox_seq;
    row.collection = collection;
    row.id = id;
    row.pk = pk;
    row.doc = doc;
    row.source = source;
    row.captured_at = UnixSeconds();
    outbox.push_back(std::move(row));
  }
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_MEMORY_STATE_H_
