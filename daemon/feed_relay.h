// FeedRelay: publishes the change outbox to the change feed, exactly once, in
// commit order per document. It owns no concrete outbox or sink: `denormd
// run` and `denormd relay` give it the PostgreSQL outbox and the Kafka sink
// (daemon/relay.h), tests give it the memory outbox and a sink of their own.
//
// The protocol (docs/architecture.md, "The change feed", has it with every
// crash point):
//   Start: claim the outbox (one relay per store), open the sink — which
//     fences every earlier writer of the feed and returns the progress last
//     committed with the feed — and prune the outbox up to it.
//   Step: read the page of changes after the progress cursor, number them
//     (sequence, contiguous), and publish them together with the progress
//     after them, atomically (one Kafka transaction). While the broker
//     commits it, the relay prunes what the page before it published and
//     reads the page after it (from the cursor after this one: the page
//     the next Step would read, read sooner); a failed publish drops that
//     page. The next Step adds to it what committed meanwhile, up to a
//     full page. When nothing waits, the relay prunes what it published
//     last.
// The relay never trusts a progress it did not read from the sink after
// fencing: any failure of the sink (broker away, a timeout of unknown
// outcome, fenced by another relay) or of the outbox ends the session, and
// the next Start learns what is published from the sink itself. So a page is
// on the feed exactly when its progress is, and the next page starts right
// after it.
//
// A change whose message is larger than feed.max_message_bytes, or that the
// sink refuses as too large, is published as a marker (value
// {"denormd_too_large": {"collection", "id", "bytes"}}, header
// denormd-too-large) so that the feed never stalls on it.
//
// Not thread-safe: Run owns the relay (one thread); `stopping` may be set
// from anywhere. Each Publish runs on a thread of its own while the relay's
// thread uses the outbox, so the sink and the outbox are never used by two
// threads at once, but the sink is not always used from Run's thread.
#ifndef DENORMD_DAEMON_FEED_RELAY_H_
#define DENORMD_DAEMON_FEED_RELAY_H_

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "connectors/feed_sink.h"
#include "projections/outbox.h"

namespace denormd {

// Message headers of the feed.
inline constexpr const char* kFeedCollectionHeader = "denormd-collection";
inline constexpr const char* kFeedSourceHeader = "denormd-source";
inline constexpr const char* kFeedSequenceHeader = "denormd-seq";
inline constexpr const char* kFeedTooLargeHeader = "denormd-too-large";

// The message key of a document: its id, or for a collection with a
// partition key the JSON array [pk, id] (pk null when the document has none).
std::string FeedKey(bool partitioned, const std::optional<std::string>& pk, const std::string& id);

// What the relay reports; every hook may be empty. Called on Run's thread.
struct FeedRelayHooks {
  // After a page is on the feed: changes published (markers included),
  // markers among them, each change's delay from capture to commit, and
  // the seconds the page held the relay (reading it, unless it was read
  // ahead, and publishing it).
  std::function<void(uint64_t published, uint64_t too_large, const std::vector<double>& delays,
                     double relay_seconds)>
      on_published;
  // After a failed attempt (the session ends; Run retries).
  std::function<void(const Status& error)> on_failure;
  // About once a second: how far the outbox is behind.
  std::function<void(const OutboxLag& lag)> on_lag;
  // When this relay becomes (true) or stops being (false) the store's relay.
  std::function<void(bool active)> on_active;
};

class FeedRelay {
 public:
  // `config` must have a feed; everything borrowed must outlive the relay.
  FeedRelay(const Config& config, ChangeOutbox* outbox, FeedSink* sink, FeedRelayHooks hooks);

  // Claims the outbox, opens the sink, prunes what is published. *active is
  // false (and nothing else happens) while another relay holds the claim.
  Status Start(bool* active);
  // Publishes the next page (at most feed.max_messages changes); *published
  // says how many (0: none waiting; what was published is then pruned).
  // After an error, Start again.
  Status Step(size_t* published);
  // Start and Step until `stopping`, pausing feed.poll_ms when idle,
  // backing off (common/retry.h) and starting again after a failure; a
  // relay without the claim tries again every second.
  void Run(const std::atomic<bool>& stopping);

  const FeedProgress& progress() const { return progress_; }

 private:
  // The messages of `rows`, numbered from `first_sequence`; each row's
  // document moves into its message.
  std::vector<FeedMessage> Messages(std::vector<OutboxRow>* rows, uint64_t first_sequence,
                                    uint64_t* too_large) const;

  // A page of the outbox and the cursor after it.
  struct Page {
    std::vector<OutboxRow> rows;
    OutboxCursor next;
  };
  // Adds to *page the rows after page->next, up to feed.max_messages in
  // all, and moves page->next past them (nothing when the page is full).
  Status FillPage(Page* page);
  // Publishes `messages` with `after`; beside it, on this thread, prunes
  // what is published and not yet pruned and reads the page after `after`
  // into ahead_ (kept only if the publish succeeds; it may be empty, its
  // cursor still moved on). *beside: how the prune and the read went.
  Status PublishBeside(const std::vector<FeedMessage>& messages, const FeedProgress& after,
                       std::vector<int64_t>* refused, Status* beside);
  // Prunes the outbox up to progress_ unless it already was.
  Status PruneBehind();

  const Config& config_;
  const FeedConfig& feed_;
  ChangeOutbox* outbox_;
  FeedSink* sink_;
  const FeedRelayHooks hooks_;
  FeedProgress progress_;
  uint64_t pruned_sequence_ = 0;    // progress_.sequence when the outbox was last pruned
  std::optional<Page> ahead_;       // the page after progress_, read while publishing
  std::set<int64_t> refused_;  // outbox seqs the sink refused whole: sent as markers
};

}  // namespace denormd

#endif  // DENORMD_DAEMON_FEED_RELAY_H_
