// Rebuild and verify: recompute projections from the stored source.
//
// Both walk every unit a projection can have (each live root entity or group
// value, and each stored document, merged in byte order) in pages, so memory
// stays bounded however large the store. Rebuild writes each page in its own
// transaction under the same locks as a batch, so it is safe while daemons
// run; verify only reads.
#ifndef DENORMD_PROJECTIONS_MAINTENANCE_H_
#define DENORMD_PROJECTIONS_MAINTENANCE_H_

#include <functional>
#include <string>
#include <vector>

#include "projections/batch_stats.h"
#include "projections/projection_plan.h"
#include "projections/source_view.h"
#include "projections/store.h"

namespace denormd {

struct MaintenanceOptions {
  std::vector<std::string> projections;  // names; empty = all
  size_t page_size = 1000;
  // Called after each page with the projection name and units done so far.
  std::function<void(const std::string& projection, uint64_t units)> on_page;
  // Rebuild: when set, only the units it accepts are recomputed (a sample;
  // the others are left as they are).
  std::function<bool(const std::string& unit)> unit_filter;
  // Verify: at most this many units per projection, and entities per type
  // for the index, chosen at random (the same ones for the same store);
  // 0 = all.
  uint64_t sample = 0;
};

// The index rows an entity should have.
using IndexRowsOf = std::function<std::vector<ReferenceRow>(const EntityRecord&)>;

// In `txn`: locks these entities (waiting), loads those that exist,
// replaces all their index rows with `rows_of` theirs, and restores the rows
// they own of the `linked` relations (kLinked: not in `rows_of`, and removed
// by the replacement; projections/linked_rows.h); adds how many to *entities.
Status RewriteIndexRows(StoreTransaction& txn, const std::vector<EntityKey>& keys,
                        const IndexRowsOf& rows_of, const std::vector<const Relation*>& linked,
                        uint64_t* entities);

// RewriteIndexRows for every live entity of `types`, in pages of
// `page_size`, each its own transaction (a writer, like a batch). The link
// types of `linked` go first: the rows kept through a link are read from
// the link rows' own.
Status ReindexTypes(Store* store, const std::vector<std::string>& types,
                    const IndexRowsOf& rows_of, const std::vector<const Relation*>& linked,
                    const MaintenanceOptions& options, uint64_t* entities);

// Rewrites the reference index rows (and child counts) of every live entity
// from the config's relations: needed when the config's projections changed
// which relations exist. Pages of `page_size` entities, each in its own
// transaction under the entities' locks; then every per-target count is set
// from the rows (alone: the writers' lock taken exclusively).
Status Reindex(const ProjectionPlan& plan, Store* store, const MaintenanceOptions& options,
               uint64_t* entities);

// Returns InvalidInput when a named projection does not exist.
Status Rebuild(const ProjectionPlan& plan, Store* store, const MaintenanceOptions& options,
               BatchStats* stats);

// Appends one line per difference; an empty list means the tables are exact.
// Every document is recomputed by its projection's definition from the
// stored source rows alone (projections/source_view.h), not through the
// reference index, its counters, the bucket member keys or the plan's
// relations, and compared with the stored one and its columns. Without named
// projections it also checks those structures against the source: each live
// entity's index rows (targets and order keys) are those its data names now,
// and each target's counter (but a link's sides' and pairs', which keep
// none) equals both its rows and the source's own count of its referrers.
// All in one read-only snapshot. Memory: the referrer ids of each (type,
// field) the config groups by (SourceView), and one page.
Status Verify(const ProjectionPlan& plan, Store* store, const MaintenanceOptions& options,
              std::vector<std::string>* differences);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_MAINTENANCE_H_
