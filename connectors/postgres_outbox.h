// PostgresOutbox: the change outbox (<schema>.outbox) as the relay reads it,
// on a connection of its own (autocommit).
//
// Cursors are PostgreSQL snapshots (pg_snapshot as text, "xmin:xmax:xip,...").
// A row is "committed as of" a snapshot when its writing transaction (txid)
// is visible in it. Read walks windows: the rows committed as of `until`
// and not as of `through`, in seq order, past `after`; an exhausted window
// is followed by the next one, from `until` to a snapshot taken now.
//
// Why no row is ever skipped or returned twice, although seqs are handed out
// before their transactions commit, in any order (the classic outbox
// pitfall: a relay reading "seq > last" skips a row whose transaction took
// seq 10 and committed after the one that took seq 11): windows are cut by
// snapshots, not by seq. A row belongs to exactly one window — the first
// whose `until` shows its transaction committed — whatever its seq; a row
// committed later than a snapshot already used can only belong to a later
// window. And a window is read only after its `until` was taken, so every
// row of it is visible to the read (none can appear in it afterwards).
//
// Order: a document's changes commit one after the other (the second writer
// waits for the first one's row lock), so the later one is in the same or a
// later window and, within a window, has the higher seq (it took its seq
// after the first committed).
//
// Claim takes a session advisory lock (per schema): one relay per store.
// Not thread-safe.
#ifndef DENORMD_CONNECTORS_POSTGRES_OUTBOX_H_
#define DENORMD_CONNECTORS_POSTGRES_OUTBOX_H_

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "projections/outbox.h"

namespace denormd {

class PostgresOutbox : public ChangeOutbox {
 public:
  // `config` (with a feed) must outlive it. Does not connect; Claim does.
  PostgresOutbox(const Config& config, std::string connection_string);
  ~PostgresOutbox() override;

  Status Claim(bool* claimed) override;
  Status Read(const OutboxCursor& from, size_t max, std::vector<OutboxRow>* rows,
              OutboxCursor* next) override;
  Status Prune(const OutboxCursor& published, uint64_t sequence) override;
  Status CheckProgress(const OutboxCursor& published, uint64_t sequence,
                       std::string* problem) override;
  Status Lag(OutboxLag* out) override;

  // Drops the connection (and with it the claim).
  void Disconnect();

 private:
  Status Connect();
  // Runs `body` on the connection; a failure drops the connection.
  template <typename F>
  Status Use(const std::string& what, F&& body);

  const Config& config_;
  std::string connection_string_;
  std::string schema_;  // quoted
  struct Connection;  // wraps pqxx::connection, kept out of this header
  std::unique_ptr<Connection> connection_;
  bool claimed_ = false;
};

// The cursor as one line of text ("through|until|after"), for feed_state
// and logs.
std::string CursorText(const OutboxCursor& cursor);

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_OUTBOX_H_
