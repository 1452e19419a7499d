// What a model costs on the data it runs on, before it costs it in
// production: for each field that reads a relation (count, ids, embed,
// lookup, buckets; via, by or through a link), how many members a document
// holds and how many documents one member's change rewrites; for each
// collection, how large its documents are; for each entity type, how many
// index rows its entities keep; and the recommendations those figures
// justify. `denormd advise` prints it (daemon/advise_report.h).
//
// Read from the stored source and documents through the store's roles
// (SourceRows, DocumentTables), so it runs on any store, and computed from
// the entities' own data with the plan's relations: not from the reference
// index or its counters. With a sample (0 < sample < 1) only the entities and
// documents whose id hashes into that fraction are read, the same ones on
// every run: a document's members and a member's documents are then counted
// over the sampled referrers and scaled by 1 / sample (estimates, marked so).
#ifndef DENORMD_PROJECTIONS_ADVICE_H_
#define DENORMD_PROJECTIONS_ADVICE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "projections/projection_plan.h"
#include "projections/store.h"

namespace denormd {

// A distribution of counts over keys (documents, members, ...).
struct Distribution {
  uint64_t keys = 0;   // how many keys were measured
  uint64_t total = 0;  // the sum of their counts
  uint64_t p50 = 0, p99 = 0, max = 0;  // nearest-rank percentiles
  // The largest counts with their keys, largest first (ties by key).
  std::vector<std::pair<std::string, uint64_t>> top;
  // A histogram in powers of two: bins[0] keys with count 0, bins[i] (i >= 1)
  // keys with a count in [2^(i-1), 2^i); no bins after the last non-empty.
  std::vector<uint64_t> bins;
};

// The distribution of `counts` (one per key), keeping the `top` largest.
Distribution Distribute(const std::map<std::string, uint64_t>& counts, size_t top);

// One field reading a relation, measured.
struct FieldFanOut {
  std::string projection;
  std::string field;             // "" for a bucket projection's grouping
  std::string kind;              // count, ids, embed, lookup, buckets
  std::string derivation;        // the field as the config says it, normalized
  std::string document_type;     // the documents' entity type (`from`, or the group's)
  std::string member_type;       // the entities the field reads
  std::string relation;          // "comment.postId", "book_author: author_id -> book_id"
  std::string path;              // the `via` or `by` path ("postId"); "" through a link
  std::optional<uint64_t> limit; // the field's limit; the bucket size for buckets
  // Members per document (children per parent, ids a lookup names, linked
  // entities), over the documents with at least one.
  Distribution members_per_document;
  // Documents per member: how many documents one member's change rewrites
  // (for buckets: one, the member's bucket; not measured).
  Distribution documents_per_member;
};

// One collection's documents, measured.
struct CollectionSizes {
  std::string collection;
  std::string projection;
  Distribution bytes;  // per document: its JSON text as the store returns it
};

// The reference index rows one entity type's entities keep, measured on the
// stored entities: a write of such an entity inserts and deletes what
// changed of them, each row moving its target's counter (but a link
// type's: Relation::counted), besides the entity's own row. A link type's
// entities also make the rows kept per linked pair (`linked_relations`,
// one row per pair and relation).
struct IndexRowsOfType {
  std::string entity_type;
  std::vector<std::string> relations;         // the relations its rows are kept in
  std::vector<std::string> linked_relations;  // kept per linked pair, for its links
  Distribution rows_per_entity;               // over the live entities read
};

// A recommendation: which rule found what, where, and what to change.
struct Recommendation {
  std::string rule;        // unbounded-members, wide-fanout, large-document
  std::string where;       // "projections.authors.fields.books"
  std::string finding;     // the figures that justify it
  std::string suggestion;  // the config change, as the user would write it
};

struct AdviceOptions {
  double sample = 1.0;  // 0 < sample <= 1
  size_t top = 5;       // the largest keys listed per distribution
  LimitsConfig thresholds;  // the config's `limits` (docs/configuration.md)
  // Called after each page of entities or documents read: what is being
  // read and how many so far (progress output).
  std::function<void(const std::string& what, uint64_t read)> on_page;
};

struct ModelAdvice {
  double sample = 1.0;
  uint64_t entities_read = 0;
  uint64_t documents_read = 0;
  LimitsConfig thresholds;
  std::vector<FieldFanOut> fields;
  std::vector<CollectionSizes> collections;
  std::vector<IndexRowsOfType> index_rows;  // by entity type
  // How often each entity type's field changed and what that cost, from the
  // statistics `run` and `replay` keep (StreamLedger::ReadFanOuts): the last
  // 24 hours by type and field (FanOutsByField), over `observed_seconds`
  // (whole hours, at least one).
  std::vector<FanOutStat> observed;
  uint64_t observed_seconds = 0;
  std::vector<Recommendation> recommendations;
};

// Hourly statistics summed per type and field, the most documents first
// (ties by type and field).
std::vector<FanOutStat> FanOutsByField(const std::vector<FanOutStat>& hours);

// Measures the plan's model on `store` (one read-only transaction).
Status AdviseModel(const ProjectionPlan& plan, Store* store, const AdviceOptions& options,
                   ModelAdvice* out);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_ADVICE_H_
