// Random scenarios: a seeded generator of small configs and event streams
// that exercise the whole projection language — entity projections with
// paths, templates, values, count, ids (limit), embed (order_by, limit,
// select), lookup (missing skip|null, string and array references) and
// count, ids and lookup through link rows of another type; several
// derivations over one relation (type and field) with different options, on
// purpose;
// buckets in both layouts with small sizes; collections shared by two
// projections with a partition key — and streams of upserts, patches,
// deletes, stale and unversioned events and bad records, over few ids, so
// that references hit, groups fill and split, and targets come and go.
//
// The same seed always gives the same scenario (std::mt19937, no
// distributions, whose results differ between standard libraries).
#ifndef DENORMD_TESTS_RANDOM_SCENARIO_H_
#define DENORMD_TESTS_RANDOM_SCENARIO_H_

#include <cstdint>
#include <string>
#include <vector>

namespace denormd {
namespace testing {

struct RandomScenario {
  std::string config;               // YAML, with `store: {schema: random}`
  std::vector<std::string> events;  // JSON Lines, a few of them bad on purpose
  size_t batch_size = 1;            // a batch size to replay them at
};

RandomScenario MakeRandomScenario(uint32_t seed);

// The events as one JSON Lines text.
std::string EventLog(const RandomScenario& scenario);

}  // namespace testing
}  // namespace denormd

#endif  // DENORMD_TESTS_RANDOM_SCENARIO_H_
