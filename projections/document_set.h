// DocumentSet: what an event log yields — every document of a config's
// collections, and how many events were dead letters and how many were stale —
// and the comparison that says whether two such results are the same.
//
// It is the expected-documents file of `denormd test` (and of the tests:
// tests/data/article/expected.json is one):
//
//   {"buckets": {"post_comments": {"by": "postId", "field": "comments",
//                                  "layout": "stable", "size": 100}},
//    "collections": {"books": {"b1": {<the document>}, ...}, ...},
//    "dead": 7, "stale": 2}
//
// `buckets` describes the config's bucket collections (left out when it has
// none); `dead` and `stale` may be left out of a hand-written file (they are
// then not compared).
//
// Equal is what `denormd test --batch` checks (docs/configuration.md,
// "Testing projections"): the result must not depend on how events are split
// into batches. Documents are equal as
// JSON values (key order and number spelling aside), except in `stable`
// bucket collections, where which bucket holds which member may differ: there
// each group's items read in ascending `seq` must be equal, and each side must
// keep the invariants (every bucket 1..size items, all but the group's last at
// least ceil(size/2), distinct seqs, ids "<group>:<n>").
//
// Plain values and functions; thread-compatible.
#ifndef DENORMD_PROJECTIONS_DOCUMENT_SET_H_
#define DENORMD_PROJECTIONS_DOCUMENT_SET_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "projections/json.h"

namespace denormd {

// Documents by collection, then by id, as JSON text.
using Collections = std::map<std::string, std::map<std::string, std::string>>;

// How a bucket collection's documents are laid out (its projection's keys).
struct BucketShape {
  std::string by;        // the group field: the `by` path as written
  std::string field;     // the items field
  uint64_t size = 100;   // items per bucket at most
  bool stable = true;    // layout: stable (false: packed)

  bool operator==(const BucketShape& o) const {
    return by == o.by && field == o.field && size == o.size && stable == o.stable;
  }
  bool operator!=(const BucketShape& o) const { return !(*this == o); }
};

struct DocumentSet {
  Collections collections;
  std::map<std::string, BucketShape> buckets;  // by collection
  std::optional<uint64_t> dead;   // events sent to the dead letters
  std::optional<uint64_t> stale;  // events skipped as stale
};

// An empty result of `config`: each of its collections without documents,
// the shapes of its bucket collections, no counts.
DocumentSet EmptyDocumentSet(const Config& config);

// Parses an expected-documents file. InvalidInput saying what is wrong
// ("collections.books.b1: a document must be a JSON object").
Status ParseDocumentSet(const std::string& text, DocumentSet* out);

// The expected-documents file of `set`: indented by one space a level, every
// object's keys sorted, a final newline. The same set always gives the same
// bytes, so a file rewritten without changes stays as it is.
std::string DocumentSetJson(const DocumentSet& set);

struct DiffOptions {
  // Compare `stable` bucket collections bucket by bucket too (where each
  // member sits): for two stores that must behave identically.
  bool bucket_positions = false;
};

// One line per difference between `actual` and `expected`; empty when they
// are equal (see the file comment). Lines:
//   books/b1: .authors[0].name: "Ann" != "Anne"       (actual != expected)
//   books/b9: missing, expected {"id":"b9",...}
//   books/b7: unexpected {"id":"b7",...}
//   post_comments group p1: items in seq order: .[3].comment: "a" != "b"
//   post_comments/p1:2: 1 item, fewer than 2 though not its group's last (by seq)
//   buckets post_comments: {"size":50,...} != {"size":100,...}
//   dead letters: 6 != 7
//   stale events: 1 != 2
// The bucket shapes are `actual`'s where it has them, else `expected`'s.
std::vector<std::string> DiffDocumentSets(const DocumentSet& actual, const DocumentSet& expected,
                                          const DiffOptions& options = DiffOptions());

// Where two JSON values first differ, as "PATH: ACTUAL != EXPECTED", or ""
// when they are equal (JsonEquals). PATH is jq-like: "." for the values
// themselves, ".authors[0].name", ".[2]", ".[\"first name\"]" for a key that
// is not a plain name; a side that lacks the key or element shows as
// `missing`.
// Object keys are visited in byte order; long values are shortened.
std::string FirstDifference(const JsonValue& actual, const JsonValue& expected);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_DOCUMENT_SET_H_
