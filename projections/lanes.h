// Lanes: the parts of a model that share no document, and the batch
// pipelines `denormd run` applies them in, beside each other.
//
// Two entity types are in one part when a projection reads both (its root
// or bucket type and every type one of its fields depends on: count, ids and
// embed children, lookup targets, a link and the type it links) or when two
// projections write one collection. The batches of two parts take no common
// lock key and write no common row but their own positions, so they commit
// in any order beside each other, each on a connection of its own: an author
// rename rewriting thousands of books holds up no comment of another part,
// and the two parts' work overlaps on the server and the client
// (docs/architecture.md, "Lanes").
//
// A lane applies one part or several (at most `max_lanes` lanes; the parts
// beyond are spread over them). Every record goes to the lane of its first
// event's type; a record with no event (a dead letter, a tombstone) to lane
// 0, which names "" among its types for it. A record whose events span lanes
// is still right: the lock protocol makes any two batches safe together
// (it is what lets two instances share a store), lanes only make it rare
// that they meet.
//
// Positions are kept per lane (projections/stream.h, LaneKey and
// StreamProgress): a lane's row holds the last record of its types it
// applied. RowsToAdd gives, for a stream the layout has not run on yet, the
// rows its lanes start from, so that from a layout's first assignment on
// every lane of it has a row (what StreamProgress's fallback relies on).
//
// Immutable; cheap to copy.
#ifndef DENORMD_PROJECTIONS_LANES_H_
#define DENORMD_PROJECTIONS_LANES_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "projections/stream.h"

namespace denormd {

class ProjectionPlan;

// The part of `plan`'s model each of its entity types is in, named by the
// part's first type (ascending): the same on every instance of one model.
// What a batch's place among the writers is scoped to
// (WriteLocks::LockWritersOf): two parts take no common lock key.
std::map<std::string, std::string> PartOfType(const ProjectionPlan& plan);

class Lanes {
 public:
  // One lane of every type: `replay`, `denormd test`, batch.max_lanes 1, a
  // model of one part. Its rows are every-type rows (LaneKey {}).
  static Lanes Single(const Config& config);
  // The parts of `plan`'s model, in at most `max_lanes` (>= 1) lanes.
  static Lanes Of(const ProjectionPlan& plan, size_t max_lanes);

  size_t size() const { return types_.size(); }
  // The lane applying records of `type` ("" or a type no lane has: lane 0).
  size_t LaneOf(const std::string& type) const;
  // Every type lane `lane` applies, ascending, "" included for lane 0.
  const std::vector<std::string>& types(size_t lane) const { return types_[lane]; }
  // What its position rows are keyed by: its types, or {} with one lane.
  const LaneKey& key(size_t lane) const { return keys_[lane]; }
  // "author,book" (lane 0 also names "(no type)"): for logs.
  std::string Describe(size_t lane) const;

  // The rows of `stream` to add before lanes of this layout consume it, so
  // that each of its lanes has one: for each lane without a row, a row at
  // the lowest position every record of its types was applied through
  // (-1: none yet). One lane adds none on a stream that has no row at all
  // (its first commit creates it).
  std::vector<StoredPosition> RowsToAdd(const SourcePosition& stream,
                                        const StreamProgress& progress) const;
  // Where a consumer of this layout resumes on a stream: after the lowest
  // row of its lanes (-1: from the beginning).
  int64_t ResumeAfter(const StreamProgress& progress) const;

 private:
  std::vector<std::vector<std::string>> types_;
  std::vector<LaneKey> keys_;
  std::map<std::string, size_t> lane_of_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_LANES_H_
