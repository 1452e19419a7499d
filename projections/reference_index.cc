#include "projections/reference_index.h"

#include <algorithm>
#include <set>

namespace denormd {

namespace {

std::vector<IndexRange> WholeRanges(const std::vector<std::string>& targets, uint64_t limit) {
  std::vector<IndexRange> ranges;
  std::vector<std::string> unique(targets);
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  for (std::string& target : unique) ranges.push_back({std::move(target), std::nullopt, false, limit});
  return ranges;
}

// Fatal unless `side` is kept in the ascending order of `other`'s value
// (Relation::LinkSide), so that a row's sort key holds the other id.
Status CheckSideOrder(const Relation& side, const Relation& other) {
  if (side.order() == nullptr || side.order()->descending ||
      side.order()->path.text != other.path().text) {
    return Status::Fatal("internal: link side " + side.name() +
                         " is not kept in the order of the other side's value");
  }
  return Status::Ok();
}

// Where a link side's rows whose other side is no one string start: an
// array's OrderKey is 0x01 0x03, after the strings' 0x01 0x01 and the
// booleans' 0x01 0x02 (numbers, booleans and null name no id).
const std::string& PastStrings() {
  static const std::string kKey("\x01\x03", 2);
  return kKey;
}

// Calls add(target, other id) for each id of `other` that `rows` (of the
// link side `side`, read keys only) name: decoded from a row's sort key,
// which holds the other id (CheckSideOrder); for a target with a row whose
// key holds no one id (the other side an array, or not a string), read
// from its rows past the strings with their data. Events hold no U+0000
// (formats/json_input.cc), so a string's key always decodes.
template <typename Add>
Status OtherIdsOfSideRows(ReferenceIndex& index, const Relation& side, const Relation& other,
                          const std::vector<Referrer>& rows, Add&& add) {
  std::set<std::string> unkeyed;
  for (const Referrer& row : rows) {
    std::optional<std::string> id = StringOfOrderKey(row.sort);
    if (id) {
      add(row.target, std::move(*id));
    } else {
      unkeyed.insert(row.target);
    }
  }
  if (unkeyed.empty()) return Status::Ok();
  std::vector<IndexRange> ranges;
  for (const std::string& target : unkeyed) {
    ranges.push_back({target, IndexKey{PastStrings(), ""}, false, 0});
  }
  std::vector<Referrer> with_data;
  DENORMD_RETURN_IF_ERROR(
      index.Scan(side, ranges, ReferenceIndex::Read::kKeysAndData, &with_data));
  for (const Referrer& row : with_data) {
    for (std::string& id : other.Targets(row.entity.key.id, *row.entity.data)) {
      add(row.target, std::move(id));
    }
  }
  return Status::Ok();
}

// The pairs of the link rows `by` (one side of `link`) finds for `ids`,
// read keys only (OtherIdsOfSideRows).
Status ReadLinks(ReferenceIndex& index, const Link& link, const Relation& by,
                 const std::vector<std::string>& ids, std::vector<LinkedPair>* out) {
  const bool by_from = &by == &link.from();
  const Relation& other = by_from ? link.to() : link.from();
  DENORMD_RETURN_IF_ERROR(CheckSideOrder(by, other));
  std::vector<Referrer> rows;
  DENORMD_RETURN_IF_ERROR(ReadReferrers(index, by, ids, ReferenceIndex::Read::kKeys, &rows));
  const size_t first = out->size();
  DENORMD_RETURN_IF_ERROR(OtherIdsOfSideRows(
      index, by, other, rows, [&](const std::string& target, std::string id) {
        if (by_from) {
          out->push_back({target, std::move(id)});
        } else {
          out->push_back({std::move(id), target});
        }
      }));
  std::sort(out->begin() + first, out->end());
  out->erase(std::unique(out->begin() + first, out->end()), out->end());
  return Status::Ok();
}

}  // namespace

Status ReadReferrers(ReferenceIndex& index, const Relation& relation,
                     const std::vector<std::string>& targets, ReferenceIndex::Read read,
                     std::vector<Referrer>* out) {
  if (targets.empty()) return Status::Ok();
  return index.Scan(relation, WholeRanges(targets, 0), read, out);
}

Status ReadFirstReferrers(ReferenceIndex& index, const Relation& relation,
                          const std::vector<std::string>& targets, uint64_t limit,
                          ReferenceIndex::Read read, std::vector<Referrer>* out) {
  if (targets.empty() || limit == 0) return Status::Ok();
  return index.Scan(relation, WholeRanges(targets, limit), read, out);
}

void ReadReferrersAhead(ReferenceIndex& index, const Relation& relation,
                        const std::vector<std::string>& targets, uint64_t limit,
                        ReferenceIndex::Read read) {
  if (!targets.empty()) index.ReadScanAhead(relation, WholeRanges(targets, limit), read);
}

Status CountReferrers(ReferenceIndex& index, const Relation& relation,
                      const std::vector<std::string>& targets,
                      std::map<std::string, uint64_t>* out) {
  if (targets.empty()) return Status::Ok();
  return index.Count(relation, WholeRanges(targets, 0), out);
}

Status CountReferrersFrom(ReferenceIndex& index, const Relation& relation,
                          const std::map<std::string, IndexKey>& from,
                          std::map<std::string, uint64_t>* out) {
  if (from.empty()) return Status::Ok();
  std::vector<IndexRange> ranges;
  for (const auto& entry : from) ranges.push_back({entry.first, entry.second, false, 0});
  return index.Count(relation, ranges, out);
}

Status ReadAround(ReferenceIndex& index, const Relation& relation,
                  const std::map<std::string, ReadStart>& starts, uint64_t limit,
                  ReferenceIndex::Read read, std::vector<Referrer>* out) {
  if (starts.empty()) return Status::Ok();
  std::vector<IndexRange> ranges;
  for (const auto& entry : starts) {
    if (entry.second.before > 0) {
      ranges.push_back({entry.first, entry.second.key, true, entry.second.before});
    }
    ranges.push_back({entry.first, entry.second.key, false, limit});
  }
  return index.Scan(relation, ranges, read, out);
}

Status ReadLinksFrom(ReferenceIndex& index, const Link& link,
                     const std::vector<std::string>& from_ids, std::vector<LinkedPair>* out) {
  return ReadLinks(index, link, link.from(), from_ids, out);
}

Status ReadLinksTo(ReferenceIndex& index, const Link& link, const std::vector<std::string>& to_ids,
                   std::vector<LinkedPair>* out) {
  return ReadLinks(index, link, link.to(), to_ids, out);
}

Status ReadLinkedPairs(ReferenceIndex& index, const Link& link,
                       const std::vector<LinkedPair>& asked, std::set<LinkedPair>* linked) {
  if (asked.empty()) return Status::Ok();
  if (link.pairs() != nullptr) {
    std::vector<std::string> keys;
    for (const LinkedPair& pair : asked) keys.push_back(Link::PairKey(pair.from, pair.to));
    std::vector<Referrer> rows;
    DENORMD_RETURN_IF_ERROR(ReadFirstReferrers(index, *link.pairs(), keys, 1,
                                               ReferenceIndex::Read::kKeys, &rows));
    for (const Referrer& row : rows) {
      LinkedPair pair;
      if (Link::SplitPairKey(row.target, &pair.from, &pair.to)) linked->insert(std::move(pair));
    }
    return Status::Ok();
  }
  const Relation& side = link.from();
  DENORMD_RETURN_IF_ERROR(CheckSideOrder(side, link.to()));
  // Per pair the side's first row at the `to` id; per `from` id its first
  // row past the strings, which tells whether it has rows of arrays.
  const std::set<LinkedPair> wanted(asked.begin(), asked.end());
  std::vector<IndexRange> ranges;
  std::set<std::string> from_ids;
  for (const LinkedPair& pair : wanted) {
    const JsonValue to(rapidjson::StringRef(pair.to.data(), pair.to.size()));
    ranges.push_back({pair.from, IndexKey{OrderKey(&to, false), ""}, false, 1});
    from_ids.insert(pair.from);
  }
  for (const std::string& from : from_ids) {
    ranges.push_back({from, IndexKey{PastStrings(), ""}, false, 1});
  }
  std::vector<Referrer> rows;
  DENORMD_RETURN_IF_ERROR(index.Scan(side, ranges, ReferenceIndex::Read::kKeys, &rows));
  return OtherIdsOfSideRows(index, side, link.to(), rows,
                            [&](const std::string& from, std::string to) {
                              LinkedPair pair{from, std::move(to)};
                              if (wanted.count(pair)) linked->insert(std::move(pair));
                            });
}

void SortByKey(std::vector<const Referrer*>* referrers) {
  std::sort(referrers->begin(), referrers->end(), [](const Referrer* a, const Referrer* b) {
    if (a->sort != b->sort) return a->sort < b->sort;
    return a->entity.key.id < b->entity.key.id;
  });
}

std::map<std::string, std::vector<const Referrer*>> GroupByTarget(
    const std::vector<Referrer>& referrers) {
  std::map<std::string, std::vector<const Referrer*>> out;
  for (const Referrer& referrer : referrers) out[referrer.target].push_back(&referrer);
  for (auto& entry : out) SortByKey(&entry.second);
  return out;
}

}  // namespace denormd
