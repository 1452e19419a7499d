// MemoryRun: event logs applied to a fresh MemoryStore through the same batch
// loop as `denormd replay` (ReplayLog), for `denormd test`: the documents a
// config makes of a log, with no database server and nothing kept.
//
// The engine is the one that runs on PostgreSQL (plan, decoder, batch
// applier); only the store differs, and the suite checks that both stores
// give the same documents (tests/connectors/memory_equals_postgres_test.cc).
#ifndef DENORMD_DAEMON_MEMORY_RUN_H_
#define DENORMD_DAEMON_MEMORY_RUN_H_

#include <string>
#include <vector>

#include "config/config.h"
#include "daemon/replay.h"
#include "projections/document_set.h"
#include "projections/memory_store.h"
#include "projections/stream.h"

namespace denormd {

struct MemoryRun {
  // Every collection of the config (empty ones too), the bucket shapes, and
  // the dead and stale counts.
  DocumentSet documents;
  // In the order they were read; `at.source` is the log's stream name
  // (ReplayReport::source).
  std::vector<DeadLetter> dead_letters;
  std::vector<ReplayReport> logs;  // one per log, in order
  BatchStats stats;                // all logs
};

// Applies `logs` in order ("-" is stdin), `batch_size` events a batch (>= 1),
// and fills *out. A log that cannot be opened is InvalidInput; *out then holds
// what the logs before it did.
Status RunInMemory(const Config& config, const std::vector<std::string>& logs, size_t batch_size,
                   MemoryRun* out);

// What `state` holds now, as a DocumentSet of `config`. Documents are keyed
// by id; in a shared collection (keyed on (pk, id)) an id that several
// partitions hold is written "<pk>/<id>" for each of them. Only the
// config's collections (not those of another model, or built beside).
DocumentSet MemoryDocumentSet(const Config& config, const MemoryState& state);

}  // namespace denormd

#endif  // DENORMD_DAEMON_MEMORY_RUN_H_
