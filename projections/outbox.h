// The change outbox: every document change of a published collection, as
// the store captured it in the transaction that made it (DocumentTables), read
// by the relay that publishes the change feed (daemon/feed_relay.h).
//
// The outbox's order is the feed's order: per document (collection, id) it
// is the order in which the changes committed, because two transactions that
// change one document serialize on it (the second writes, and takes its place
// in the outbox, only after the first committed).
//
// A reader walks the outbox with a cursor that a store defines and the relay
// stores with what it published (docs/architecture.md, "The change feed").
// Everything at or before a cursor is published; Read returns what follows it,
// and rows committed later never land before a cursor already returned: that
// is the property the relay's exactly-once argument needs.
//
// Implementations: connectors/postgres_outbox.h (cursors are PostgreSQL
// snapshots) and MemoryOutbox (memory_store.h). Not thread-safe.
#ifndef DENORMD_PROJECTIONS_OUTBOX_H_
#define DENORMD_PROJECTIONS_OUTBOX_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace denormd {

// One captured change.
struct OutboxRow {
  int64_t seq = 0;                 // the store's order of capture (unique; gaps allowed)
  std::string collection;
  std::string id;
  std::optional<std::string> pk;   // the pk column (partition key or bucket group)
  std::optional<std::string> doc;  // the document as JSON text; absent: deleted
  std::string source;              // the stream positions of the change (SetChangeSource)
  double captured_at = 0;          // Unix seconds when the change was written
};

// Where a walk of the outbox stands: every row committed as of `through`
// is behind it, and of the rows committed as of `until` but not `through`,
// those with seq <= `after`. `through` and `until` are the store's own
// (PostgreSQL: a pg_snapshot as text); empty `through`: nothing is behind;
// empty `until`: no window is open.
struct OutboxCursor {
  std::string through;
  std::string until;
  int64_t after = 0;

  bool operator==(const OutboxCursor& o) const {
    return through == o.through && until == o.until && after == o.after;
  }
};

// How far the outbox is behind: rows not yet pruned, and the age of the oldest.
struct OutboxLag {
  uint64_t rows = 0;
  double oldest_seconds = 0;  // 0 when empty
};

class ChangeOutbox {
 public:
  virtual ~ChangeOutbox() = default;
  // Makes this reader the only relay of the store while it lives (others
  // wait): *claimed says whether it is. A lost connection loses the claim;
  // every other method then fails Transient until Claim succeeds again.
  virtual Status Claim(bool* claimed) = 0;
  // Up to `max` rows after `from`, in feed order, and the cursor after them
  // (*next may move past an empty stretch even when *rows is empty).
  virtual Status Read(const OutboxCursor& from, size_t max, std::vector<OutboxRow>* rows,
                      OutboxCursor* next) = 0;
  // Deletes the rows at or before `published` (they are on the feed) and
  // records `sequence` and the cursor for `denormd status`.
  virtual Status Prune(const OutboxCursor& published, uint64_t sequence) = 0;
  // Compares a progress record (what the feed says is published) with what
  // the store knows: its cursor must not be ahead of anything the store has
  // handed out, and its sequence not behind the one the store recorded at
  // its last Prune. *problem says how they disagree, "" when they agree.
  // The relay prunes and publishes nothing on a disagreement (a forged or
  // foreign progress record would otherwise delete the whole outbox).
  virtual Status CheckProgress(const OutboxCursor& published, uint64_t sequence,
                               std::string* problem) = 0;
  virtual Status Lag(OutboxLag* out) = 0;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_OUTBOX_H_
