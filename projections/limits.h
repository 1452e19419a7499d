// Sizes the store can index, checked before anything is written: an event
// whose entity would exceed one is refused as a dead letter with the reason,
// and the rest of its batch applies. (PostgreSQL's B-tree rows hold at most
// about 2.7 kB; a reference index row holds a target, a sort key and an id.)
// docs/architecture.md, "Limits and bad input", lists every limit.
#ifndef DENORMD_PROJECTIONS_LIMITS_H_
#define DENORMD_PROJECTIONS_LIMITS_H_

#include <cstddef>

namespace denormd {

// An entity id, in bytes (checked by the input formats).
constexpr size_t kMaxIdBytes = 512;
// A referenced id (a `via`/`by` value, a bucket group), in bytes.
constexpr size_t kMaxIndexedIdBytes = 512;
// An `order_by` value's sort key (about the value's length), in bytes.
constexpr size_t kMaxSortKeyBytes = 1024;

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_LIMITS_H_
