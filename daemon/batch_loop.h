// BatchLoop: the one loop that moves records from an EventSource into the
// store, shared by `denormd run` (Kafka, until stopped) and `denormd replay`
// (event logs, until their end). It owns no concrete source or store.
//
// Each round: poll up to batch.max_events records (waiting at most
// batch.max_delay_ms after the first), decode them with the Decoder, publish
// the dead letters to the DeadLetterSink (if any), apply the batch in one
// transaction (BatchApplier) with the source's fencing positions, and tell the
// source it committed. A batch that fails transiently (the store away, a
// deadlock) is retried as a whole with RetryBackoffMs; a Conflict (another
// consumer moved a fenced stream) makes the source re-seek to the stored
// positions. A batch the store refuses as data (InvalidInput: a value it
// cannot hold) is split in halves, recursively, until the record responsible
// is alone; that record becomes a dead letter with the store's reason and
// everything else applies, so no record can stop the run for good. Anything
// else ends the run with nothing of that batch committed.
//
// Dead letters go to the DeadLetterSink before the batch is applied (so a
// crash after publishing and before the commit publishes them again: the
// topic is at-least-once, keyed source/partition/position; the dead_letters
// table is exactly-once); after three failed attempts to publish, the batch
// applies without them.
//
// Logs: batch_retry, batch_recovered, batch_fenced, batch_abandoned_for_stop,
// batch_split, record_refused, dead_letters_not_published,
// bucket_tails_rendered.
// Not thread-safe (one thread runs it and its hooks); `stopping` may be set
// from a signal handler.
#ifndef DENORMD_DAEMON_BATCH_LOOP_H_
#define DENORMD_DAEMON_BATCH_LOOP_H_

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "connectors/event_source.h"
#include "formats/decoder.h"
#include "projections/batch_applier.h"
#include "projections/store.h"

namespace denormd {

struct BatchLoopOptions {
  size_t max_events = 5000;   // records per batch, >= 1
  int max_delay_ms = 50;      // wait for more after the first record
  int idle_ms = 500;          // longest wait for a first record
  int max_attempts = 0;       // tries per batch on transient errors; 0: until stopped
};

// What the loop reports; every hook may be empty.
struct BatchLoopHooks {
  // After every poll, with or without records.
  std::function<void()> after_poll;
  // After a batch committed: its records, what applying it did, its wall
  // time (retries included) and the attempts it took.
  std::function<void(const std::vector<RawRecord>& records, const BatchStats& stats,
                     double seconds, int attempts)>
      on_commit;
  // After an attempt failed transiently, before the pause.
  std::function<void(const Status& error, int attempt)> on_retry;
  // Whenever the loop is known to be healthy: after every poll and commit,
  // and about every 20 ms of a pause between attempts. Never while the loop
  // is blocked inside the source or the store, so a watchdog fed from here
  // (ServiceNotifier::KeepAlive) fires on a hang, not on an outage.
  std::function<void()> alive;
};

class BatchLoop {
 public:
  // Everything borrowed must outlive the loop; `dead_letters` may be null.
  BatchLoop(EventSource& source, const Decoder& decoder, const BatchApplier& applier,
            Store& store, DeadLetterSink* dead_letters, BatchLoopOptions options,
            BatchLoopHooks hooks, const std::atomic<bool>& stopping);

  // Runs until the source is exhausted or a stop is requested (Ok), or until
  // a batch fails for good (that error).
  Status Run();

  // Replaces the options from the next poll on (a reload). Call it only on
  // the loop's own thread, i.e. from a hook; the batch in hand keeps the
  // options it was read with.
  void SetOptions(const BatchLoopOptions& options) { options_ = options; }
  const BatchLoopOptions& options() const { return options_; }

 private:
  enum class Outcome { kCommitted, kFenced, kAbandoned };
  // Applies `records`, splitting them when the store refuses their data.
  Status Apply(const std::vector<RawRecord>& records, Outcome* outcome);
  // Applies one batch, retrying as the file comment says; with `refuse`,
  // every record of it becomes a dead letter with that reason.
  Status ApplyWithRetry(const std::vector<RawRecord>& records, const std::string* refuse,
                        Outcome* outcome);
  // Sleeps up to `ms`, waking early on a stop request.
  void Pause(int ms) const;

  EventSource& source_;
  const Decoder& decoder_;
  const BatchApplier& applier_;
  Store& store_;
  DeadLetterSink* dead_letters_;
  BatchLoopOptions options_;
  const BatchLoopHooks hooks_;
  const std::atomic<bool>& stopping_;
};

// Warns (bucket_tails_rendered) when a batch rendered bucket tails from their
// entities because the stored buckets did not fit (edited behind denormd's
// back, or a `select` changed without a rebuild): the batch is exact, but
// `verify` is due. The loop calls it after every commit.
void WarnIfTailsRendered(const BatchStats& stats);

// A PositionLoader reading the positions stored in `store` (which must
// outlive it), each call in a transaction of its own.
PositionLoader LoadPositionsFrom(Store& store);

}  // namespace denormd

#endif  // DENORMD_DAEMON_BATCH_LOOP_H_
