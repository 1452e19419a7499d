// The reads of the reference index that the engine uses, each built on the
// ReferenceIndex primitives (Scan and Count, projections/store.h), and the
// rows an entity contributes to it.
#ifndef DENORMD_PROJECTIONS_REFERENCE_INDEX_H_
#define DENORMD_PROJECTIONS_REFERENCE_INDEX_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "projections/store.h"

namespace denormd {

// Every referrer of each target.
Status ReadReferrers(ReferenceIndex& index, const Relation& relation,
                     const std::vector<std::string>& targets, ReferenceIndex::Read read,
                     std::vector<Referrer>* out);

// The first `limit` referrers of each target in (sort, id) order.
Status ReadFirstReferrers(ReferenceIndex& index, const Relation& relation,
                          const std::vector<std::string>& targets, uint64_t limit,
                          ReferenceIndex::Read read, std::vector<Referrer>* out);

// How many referrers each target has (every target gets an entry).
Status CountReferrers(ReferenceIndex& index, const Relation& relation,
                      const std::vector<std::string>& targets,
                      std::map<std::string, uint64_t>* out);

// How many referrers of each target order at or after its key.
Status CountReferrersFrom(ReferenceIndex& index, const Relation& relation,
                          const std::map<std::string, IndexKey>& from,
                          std::map<std::string, uint64_t>* out);

// Where a read around a key starts: at `key`, with the `before` referrers
// just preceding it.
struct ReadStart {
  IndexKey key;
  uint64_t before = 0;
};

// Tells the index (ReferenceIndex::ReadScanAhead) that ReadReferrers
// (`limit` 0) or ReadFirstReferrers (`limit`) will be asked for `targets`.
void ReadReferrersAhead(ReferenceIndex& index, const Relation& relation,
                        const std::vector<std::string>& targets, uint64_t limit,
                        ReferenceIndex::Read read);

// For each target, the `before` referrers preceding its start and the
// referrers from the start on (at most `limit` of those; 0 = all); any order.
Status ReadAround(ReferenceIndex& index, const Relation& relation,
                  const std::map<std::string, ReadStart>& starts, uint64_t limit,
                  ReferenceIndex::Read read, std::vector<Referrer>* out);

// One pair of ids a live link row names: in the link's `from` and `to`.
struct LinkedPair {
  std::string from;
  std::string to;
  bool operator<(const LinkedPair& o) const {
    return from != o.from ? from < o.from : to < o.to;
  }
  bool operator==(const LinkedPair& o) const { return from == o.from && to == o.to; }
};

// The pairs of the live link rows whose `from` names one of `from_ids`
// (what a document through `link` is linked to), sorted and unique: two rows
// linking the same pair give one. Reads the link rows' index rows, whose
// sort keys hold the other side's id, and only a row whose other side is no
// one string with its data.
Status ReadLinksFrom(ReferenceIndex& index, const Link& link,
                     const std::vector<std::string>& from_ids, std::vector<LinkedPair>* out);

// The same for the link rows whose `to` names one of `to_ids` (the documents
// linked to a changed entity).
Status ReadLinksTo(ReferenceIndex& index, const Link& link, const std::vector<std::string>& to_ids,
                   std::vector<LinkedPair>* out);

// Which of `asked` (from id, to id) a live link row of `link` names, added
// to *linked. Reads the first row of each pair in the link's pairs
// (Link::pairs) when it keeps them; otherwise the `from` side's first row
// at the `to` id (a side is sorted by the other side's value), and, for a
// `from` id whose side has a row whose other side is no one string (an
// array), those rows with their data. O(asked) rows either way.
Status ReadLinkedPairs(ReferenceIndex& index, const Link& link,
                       const std::vector<LinkedPair>& asked, std::set<LinkedPair>* linked);

// Sorts referrers into their relation's order: (sort key, id).
void SortByKey(std::vector<const Referrer*>* referrers);

// The referrers of each target, each list in order.
std::map<std::string, std::vector<const Referrer*>> GroupByTarget(
    const std::vector<Referrer>& referrers);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_REFERENCE_INDEX_H_
