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
// Lanes (projections/lanes.h). When the source has several lanes, each has
// a store of its own (a connection) and a thread that applies its batches,
// and the loop's thread only polls, decodes and hands each record to the
// lane of its type, skipping what its lane applied already
// (EventSource::Applied). A lane takes everything queued for it when it is
// free (at most batch.max_events records), so its batches follow the input's
// pace as one loop's do; a lane whose queue holds batch.max_events records
// stops the polling until it takes them. A lane's batch records, for every
// stream of the polls it covers, the furthest position polled: every record
// of the lane's types up to there is in it or in an earlier batch of the
// lane. A lane left behind by the others (no record of its types for a
// second while the others commit) records that too, in a batch of no
// events, so that a restart does not read far back for it. Before a
// rebalance, a Conflict or a stop, the lanes finish the batch in hand and
// drop what is queued (it is read again); a lane's failure ends the loop
// once the others finished theirs. Commits, retries and progress reach the
// hooks on the loop's thread, in the order the loop learns of them.
//
// Dead letters go to the DeadLetterSink before the batch is applied (so a
// crash after publishing and before the commit publishes them again: the
// topic is at-least-once, keyed source/partition/position; the dead_letters
// table is exactly-once); after three failed attempts to publish, the batch
// applies without them.
//
// Logs: batch_retry, batch_recovered, batch_fenced, batch_abandoned_for_stop,
// batch_split, record_refused, dead_letters_not_published,
// bucket_tails_rendered, lanes_started.
// Not thread-safe (one thread runs it and its hooks); `stopping` may be set
// from a signal handler.
#ifndef DENORMD_DAEMON_BATCH_LOOP_H_
#define DENORMD_DAEMON_BATCH_LOOP_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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

// One committed batch, as the on_commit hook hears of it.
struct CommittedBatch {
  const std::vector<RawRecord>& records;
  const BatchStats& stats;
  double seconds;           // its wall time, retries included
  int attempts;
  double committed_at;      // Unix seconds when its COMMIT returned
  size_t lane;
};

// What the loop reports; every hook may be empty.
struct BatchLoopHooks {
  // After every poll, with or without records.
  std::function<void()> after_poll;
  // After a batch of records committed (not after a lane's batch of no
  // events, which only records its positions).
  std::function<void(const CommittedBatch& batch)> on_commit;
  // After an attempt failed transiently, before the pause.
  std::function<void(const Status& error, int attempt)> on_retry;
  // Whenever the loop is known to be healthy: after every poll and commit,
  // and about every 20 ms of a pause between attempts. Never while a batch
  // (of any lane) has been blocked inside the store for over a second, nor
  // while the loop is blocked inside the source, so a watchdog fed from
  // here (ServiceNotifier::KeepAlive) fires on a hang, not on an outage.
  std::function<void()> alive;
};

class BatchLoop {
 public:
  // Everything borrowed must outlive the loop; `dead_letters` may be null.
  // One store: the source must have one lane.
  BatchLoop(EventSource& source, const Decoder& decoder, const BatchApplier& applier,
            Store& store, DeadLetterSink* dead_letters, BatchLoopOptions options,
            BatchLoopHooks hooks, const std::atomic<bool>& stopping);
  // A store per lane of the source (`lane_stores[i]` for lane i), each used
  // by that lane's thread only, none by the caller's hooks or the source's
  // PositionLoader (which run on the loop's thread). With
  // `set_rebalance_hook` (a KafkaEventSource's SetRebalanceHook), the lanes
  // end their batches in hand before a rebalance loads positions.
  BatchLoop(EventSource& source, const Decoder& decoder, const BatchApplier& applier,
            std::vector<Store*> lane_stores, DeadLetterSink* dead_letters,
            BatchLoopOptions options, BatchLoopHooks hooks, const std::atomic<bool>& stopping,
            std::function<void(std::function<void()>)> set_rebalance_hook = nullptr);
  ~BatchLoop();

  // Runs until the source is exhausted or a stop is requested (Ok), or until
  // a batch fails for good (that error).
  Status Run();

  // Replaces the options from the next poll on (a reload). Call it only on
  // the loop's own thread, i.e. from a hook; the batch in hand keeps the
  // options it was read with.
  void SetOptions(const BatchLoopOptions& options);
  const BatchLoopOptions& options() const { return options_; }

 private:
  enum class Outcome { kCommitted, kFenced, kAbandoned };
  class LaneWorker;
  // Where one batch's progress goes: straight to the source and the hooks
  // (one lane, the loop's thread), or to the loop through its lane
  // (LaneWorker).
  class Reporter {
   public:
    virtual ~Reporter() = default;
    virtual std::vector<SourcePosition> Fence() = 0;
    virtual void Alive() = 0;
    virtual void Retrying(const Status& error, int attempt) = 0;
    virtual void Committed(const std::vector<RawRecord>& records, const EventBatch& batch,
                           const BatchStats& stats, double seconds, int attempts) = 0;
  };
  class DirectReporter;

  Status RunOneLane();
  Status RunLanes();
  // Applies `records` (decoded as `batch`, or decoded here when null),
  // splitting them when the store refuses their data.
  Status Apply(size_t lane, Store& store, const std::vector<RawRecord>& records,
               EventBatch* batch, int max_attempts, Reporter& reporter, Outcome* outcome);
  // Applies one batch, retrying as the file comment says; with `refuse`,
  // every record of it becomes a dead letter with that reason.
  Status ApplyWithRetry(Store& store, const std::vector<RawRecord>& records,
                        EventBatch batch, const std::string* refuse, int max_attempts,
                        Reporter& reporter, Outcome* outcome);
  // Sleeps up to `ms`, waking early on a stop request.
  void Pause(int ms, Reporter& reporter) const;

  // Lanes: the loop's thread.
  // Hands this poll's records to their lanes.
  void Route(const std::vector<RawRecord>& records);
  // Queues a batch of no events for each lane the others left behind.
  void AdvanceIdleLanes();
  // Waits until every lane applied what is queued for it (the end of the
  // source), a lane failed or was fenced (into *failed: the failure, or
  // what the source's Reseek says), or a stop.
  void Settle(Status* failed);
  // Drops what is queued and waits until no lane has a batch in hand (what
  // they committed stays reported: TakeReports tells the source and hooks).
  void Drain();
  // After a rebalance or a re-seek (the lanes drained): each lane's fence
  // from the source's reloaded positions, and nothing polled yet.
  void ResumeLanes();
  // The hooks and the source told what the lanes did; the first failure, or
  // a Conflict to answer, into *failed / *fenced.
  void TakeReports(Status* failed, bool* fenced);
  bool LanesHealthy() const;
  bool AnyLaneBusy() const;

  EventSource& source_;
  const Decoder& decoder_;
  const BatchApplier& applier_;
  std::vector<Store*> stores_;
  DeadLetterSink* dead_letters_;
  std::mutex dead_letters_mu_;  // lanes publish from their threads
  BatchLoopOptions options_;
  const BatchLoopHooks hooks_;
  const std::atomic<bool>& stopping_;
  // Set when a lane failed: the other lanes' retries give up.
  std::atomic<bool> abandon_{false};
  std::function<void(std::function<void()>)> set_rebalance_hook_;

  // Lanes (RunLanes), under mu_.
  struct Report;
  mutable std::mutex mu_;
  std::condition_variable reported_;
  std::vector<std::unique_ptr<LaneWorker>> lanes_;
  std::deque<Report> reports_;
  std::map<std::string, SourcePosition> polled_;  // the furthest polled, per stream
  bool reassigned_ = false;  // a rebalance ran: fences to reload
  uint64_t generation_ = 0;  // bumped by ResumeLanes
};

// Warns (bucket_tails_rendered) when a batch rendered bucket tails from their
// entities because the stored buckets did not fit (edited behind denormd's
// back, or a `select` changed without a rebuild): the batch is exact, but
// `verify` is due. The loop calls it after every commit.
void WarnIfTailsRendered(const BatchStats& stats);

// A PositionLoader reading the positions stored in `store` (which must
// outlive it), each call in a transaction of its own, after one that adds
// the rows the lanes start from (Lanes::RowsToAdd) where some are missing.
PositionLoader LoadPositionsFrom(Store& store);

}  // namespace denormd

#endif  // DENORMD_DAEMON_BATCH_LOOP_H_
