// `denormd plan` and `denormd apply`: changing the projections of a store
// that daemons are running, without a gap.
//
// The store records the model it runs (entities and projections) with an
// epoch; every writing transaction checks the epoch right after it joins the
// writers (WriteLocks::LockWriters), so no batch applies events
// under a model other than the one it loaded (StaleConfig: `run` then loads
// the store's model and goes on from its committed positions).
//
// apply, step by step (each numbered step survives a kill -9: the next apply
// removes what an unfinished one left, and starts over):
//   1. one apply at a time (a session advisory lock); leftovers of an
//      unfinished apply removed;
//   2. `applying` recorded, alone among the writers: from the next batch on,
//      every batch journals its source changes (before, after);
//   3. index rows of the relations the new model adds, for every live entity
//      of their types (rows of relations neither model has are removed
//      first), in pages, under the entities' locks like a batch;
//   4. each collection to rebuild (ModelChange) built from the source into a
//      new table "<collection>__next" in pages (daemons keep running);
//   5. catch-up: the journal taken and applied to the new tables in rounds
//      while batches go on, a bounded page per round;
//   6. the counts (CollectionCounts), then the switch, in one transaction
//      that holds the writers' lock exclusively: the rest of the journal, the
//      tables swapped
//      (old dropped, new renamed), the model, index fingerprint and epoch
//      recorded, `applying` removed. A reader sees the old table or the new
//      one, never a part.
//   7. index rows of relations the new model dropped removed.
// plan runs steps 1, 3 and 4 into "<collection>__plan" tables, counts them
// against the live ones as the switch would, and removes what it built.
//
// Every step that touches the store as a whole is a StoreAdministration
// method (projections/store_admin.h): this file holds the sequence, the
// store's implementation holds its statements (connectors/postgres_admin.cc
// on PostgreSQL, projections/memory_admin.cc in memory).
#ifndef DENORMD_DAEMON_APPLY_H_
#define DENORMD_DAEMON_APPLY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "projections/model_change.h"
#include "projections/store_admin.h"

namespace denormd {

struct ReconfigureOptions {
  std::string postgres;      // connection string (when `stores` is empty)
  // The stores of the schema's configs (the running model's, the target's
  // and the one the collections are built through): PostgresStores(postgres)
  // when empty; MemoryStores in tests.
  StoreFactory stores;
  bool plan_only = false;    // plan: build, count and remove; change nothing
  double sample = 1.0;       // plan: the fraction of units built (0 < sample <= 1)
  // apply: journal changes taken per page (a catch-up round's transaction
  // holds one page; the switch takes the rest page by page). >= 1.
  size_t journal_page = 5000;
  // Progress lines ("building collection books: 2,000 documents").
  std::function<void(const std::string&)> progress;
  // Called at each named step, where a crash point sits too (tests: run
  // batches between the build and the catch-up): "apply_marked",
  // "apply_indexed", "apply_built", "apply_caught_up", "apply_switching".
  std::function<void(const char* step)> at_step;
};

// What applying the new model does (or would do) to one collection: its
// documents written (new or different), deleted, and left as they are.
struct CollectionCounts {
  std::string collection;
  bool dropped = false;  // the new model has no such collection
  uint64_t written = 0;
  uint64_t deleted = 0;
  uint64_t unchanged = 0;
};

struct ReconfigureReport {
  std::string schema;
  bool had_model = true;  // false: a schema no model was recorded in yet
  uint64_t from_epoch = 0;
  uint64_t to_epoch = 0;  // apply: the epoch now in force
  std::string from_fingerprint;
  std::string to_fingerprint;
  ModelChange change;
  std::vector<CollectionCounts> collections;
  bool estimated = false;  // counts extrapolated from a sample
  double sample = 1.0;
  bool cleaned_leftovers = false;  // an unfinished apply's tables were removed
  uint64_t entities_reindexed = 0;
  uint64_t documents_built = 0;  // rows written into the new tables by the build
  uint64_t journal_changes = 0;  // changes caught up (apply)
  double index_seconds = 0;
  double build_seconds = 0;
  double switch_ms = 0;          // apply: how long the writers waited
  double estimated_seconds = 0;  // plan: the time apply would take to build
  // What a person should know before applying, each a sentence (a dropped
  // collection that the feed publishes: its documents get no deletes).
  std::vector<std::string> warnings;

  bool changes() const { return !change.empty(); }
};

// Plans or applies `target` (a validated config) to its store.
Status Reconfigure(const Config& target, const ReconfigureOptions& options,
                   ReconfigureReport* report);

// The report for people, and as one JSON object.
std::string FormatReport(const ReconfigureReport& report, bool plan, const std::string& file);
std::string ReportJson(const ReconfigureReport& report, bool plan);

}  // namespace denormd

#endif  // DENORMD_DAEMON_APPLY_H_
