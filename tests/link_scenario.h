// Link scenarios: many-to-many relations through a link entity (a join
// table), as relational sources deliver them. Authors and books linked by
// `book_author` rows ({"book_id": "b1", "author_id": "a2"}), with a config
// that reads the links from both sides (count, ids with and without a limit,
// lookup with missing skip and null), and a seeded stream of events that
// creates, deletes, re-creates, repoints and duplicates link rows (ids
// "b1:a2", and surrogate ids linking a pair twice), renames and deletes
// authors and books, and replays events out of order: duplicates, stale
// re-creates of deleted links, swapped neighbours, unversioned events.
//
// Each batch carries the documents an oracle expects after it: a model of
// the contract written independently of the engine (the version rule per
// entity, then the definitions evaluated by brute force over every entity).
//
// The same seed always gives the same scenario (std::mt19937, no
// distributions).
#ifndef DENORMD_TESTS_LINK_SCENARIO_H_
#define DENORMD_TESTS_LINK_SCENARIO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "projections/document_set.h"

namespace denormd {
namespace testing {

struct LinkBatch {
  std::vector<std::string> events;  // native JSON events
  Collections expected;             // every collection after the batch
};

struct LinkScenario {
  std::string config;  // YAML, with `store: {schema: links}`
  std::vector<LinkBatch> batches;
  // What the stream exercised (the oracle's counts).
  uint64_t stale = 0;             // events skipped by the version rule
  uint64_t stale_recreates = 0;   // of those: an upsert of a deleted link row
  uint64_t duplicate_pairs = 0;   // batches after which two live rows link one pair
};

LinkScenario MakeLinkScenario(uint32_t seed);

// A small config over the same entities: `authors` (countOfBooks and books
// through book_author) and `books` (authors: lookup through it, select
// [name]), either or both.
enum class LinkSides { kAuthors, kBooks, kBoth };
std::string LinkConfig(LinkSides sides);

// "" when `actual` holds the `expected` documents of `config`'s collections
// (as JSON values), else one line per difference (actual != expected).
std::string DiffDocuments(const Config& config, const Collections& actual,
                          const Collections& expected);

}  // namespace testing
}  // namespace denormd

#endif  // DENORMD_TESTS_LINK_SCENARIO_H_
