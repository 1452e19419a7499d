#include "daemon/batch_loop.h"

#include <chrono>
#include <thread>

#include "common/clock.h"
#include "common/crash_point.h"
#include "common/log.h"
#include "common/retry.h"

namespace denormd {

namespace {

constexpr int kDeadLetterAttempts = 3;

// A lane left behind by the others records the furthest polled position
// after this long without a batch of its own.
constexpr int64_t kIdleLaneAdvanceMs = 1000;

// A lane inside one attempt longer than this keeps the loop from telling
// the hooks it is alive (BatchLoopHooks::alive).
constexpr int64_t kLaneProgressMs = 1000;

// How long the loop's poll waits for a first record while a lane has a
// batch in hand: what it learns of the lanes waits at most this.
constexpr int kBusyPollMs = 10;

std::string StreamOf(const SourcePosition& at) {
  return at.source + '\x1f' + std::to_string(at.partition);
}

// Sets the position of `at`'s stream in `positions` (adding it).
void SetStream(const SourcePosition& at, std::vector<SourcePosition>* positions) {
  for (SourcePosition& known : *positions) {
    if (known.partition == at.partition && known.source == at.source) {
      known = at;
      return;
    }
  }
  positions->push_back(at);
}

// Whether `rows` (a lane's, per stream) are behind `at` on its stream (or do
// not name it).
bool Behind(const std::vector<SourcePosition>& rows, const SourcePosition& at) {
  for (const SourcePosition& row : rows) {
    if (row.partition == at.partition && row.source == at.source) return row.position < at.position;
  }
  return true;
}

// `from` appended to `into` (both one lane's, `from` the later).
void Merge(EventBatch&& from, EventBatch* into) {
  for (EventBatch::Item& item : from.events) into->events.push_back(std::move(item));
  for (DeadLetter& letter : from.dead_letters) into->dead_letters.push_back(std::move(letter));
  for (const SourcePosition& at : from.last_positions) AddLastPosition(at, &into->last_positions);
  into->raw_count += from.raw_count;
  into->skipped_count += from.skipped_count;
}

}  // namespace

// ---------------------------------------------------------------------------
// One lane: the loop's thread, the hooks and the source.

class BatchLoop::DirectReporter : public Reporter {
 public:
  explicit DirectReporter(BatchLoop& loop) : loop_(loop) {}
  std::vector<SourcePosition> Fence() override { return loop_.source_.FencingPositions(0); }
  void Alive() override {
    if (loop_.hooks_.alive) loop_.hooks_.alive();
  }
  void Retrying(const Status& error, int attempt) override {
    if (loop_.hooks_.on_retry) loop_.hooks_.on_retry(error, attempt);
  }
  void Committed(const std::vector<RawRecord>& records, const EventBatch& batch,
                 const BatchStats& stats, double seconds, int attempts) override {
    loop_.source_.MarkCommitted(0, batch.last_positions);
    if (loop_.hooks_.alive) loop_.hooks_.alive();
    if (loop_.hooks_.on_commit && !records.empty()) {
      loop_.hooks_.on_commit({records, stats, seconds, attempts, UnixSeconds(), 0});
    }
  }

 private:
  BatchLoop& loop_;
};

// ---------------------------------------------------------------------------
// Several lanes: what a lane's thread reports to the loop's.

struct BatchLoop::Report {
  enum class Kind { kCommitted, kRetrying, kFenced, kFailed };
  Kind kind = Kind::kCommitted;
  size_t lane = 0;
  uint64_t generation = 0;  // of the assignment its batch was read in
  std::vector<RawRecord> records;
  std::vector<SourcePosition> last;
  BatchStats stats;
  double seconds = 0;
  int attempts = 0;
  double committed_at = 0;
  Status status;
};

// A lane's thread, its queue and what it knows of its rows. Every member
// but `progress_ms` and the thread's locals is guarded by the loop's mu_.
class BatchLoop::LaneWorker : public Reporter {
 public:
  struct Work {
    std::vector<RawRecord> records;
    EventBatch batch;
  };

  LaneWorker(BatchLoop& loop, size_t index, Store& store)
      : last_commit_ms(SteadyMillis()), loop_(loop), index_(index), store_(store) {}

  void Start() { thread_ = std::thread([this] { Main(); }); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

  std::vector<SourcePosition> Fence() override {
    std::lock_guard<std::mutex> lock(loop_.mu_);
    return fence;
  }
  void Alive() override { progress_ms.store(SteadyMillis()); }
  void Retrying(const Status& error, int attempt) override {
    Report report;
    report.kind = Report::Kind::kRetrying;
    report.lane = index_;
    report.status = error;
    report.attempts = attempt;
    Push(std::move(report));
  }
  void Committed(const std::vector<RawRecord>& records, const EventBatch& batch,
                 const BatchStats& stats, double seconds, int attempts) override {
    Report report;
    report.kind = Report::Kind::kCommitted;
    report.lane = index_;
    report.records = records;
    report.last = batch.last_positions;
    report.stats = stats;
    report.seconds = seconds;
    report.attempts = attempts;
    report.committed_at = UnixSeconds();
    progress_ms.store(SteadyMillis());
    std::lock_guard<std::mutex> lock(loop_.mu_);
    for (const SourcePosition& at : batch.last_positions) SetStream(at, &fence);
    last_commit_ms = SteadyMillis();
    report.generation = generation_;
    loop_.reports_.push_back(std::move(report));
    loop_.reported_.notify_all();
  }

  // Guarded by the loop's mu_.
  std::deque<Work> queue;
  size_t queued_records = 0;
  bool busy = false;    // a batch in hand
  bool halted = false;  // fenced or failed: takes nothing until the loop says
  bool stop = false;
  std::vector<SourcePosition> fence;  // its rows, per stream, as it committed them
  int64_t last_commit_ms;
  std::condition_variable wake;
  // Set by the thread at every attempt, pause and commit.
  std::atomic<int64_t> progress_ms{0};

 private:
  void Push(Report report) {
    std::lock_guard<std::mutex> lock(loop_.mu_);
    report.generation = generation_;
    loop_.reports_.push_back(std::move(report));
    loop_.reported_.notify_all();
  }

  void Main() {
    std::unique_lock<std::mutex> lock(loop_.mu_);
    while (true) {
      wake.wait(lock, [&] { return stop || (!halted && !queue.empty()); });
      if (stop) return;
      // Everything queued, up to max_events records: the lane's batch
      // follows the input's pace.
      std::vector<RawRecord> records;
      EventBatch batch;
      batch.lane = loop_.source_.lanes().key(index_);
      const size_t max = std::max<size_t>(1, loop_.options_.max_events);
      const int max_attempts = loop_.options_.max_attempts;
      bool first = true;
      while (!queue.empty() && (first || records.size() + queue.front().records.size() <= max)) {
        Work& work = queue.front();
        queued_records -= work.records.size();
        for (RawRecord& record : work.records) records.push_back(std::move(record));
        Merge(std::move(work.batch), &batch);
        queue.pop_front();
        first = false;
      }
      busy = true;
      generation_ = loop_.generation_;
      progress_ms.store(SteadyMillis());
      lock.unlock();
      Outcome outcome = Outcome::kAbandoned;
      Status status = loop_.Apply(index_, store_, records, &batch, max_attempts, *this, &outcome);
      lock.lock();
      busy = false;
      if (!status.ok() || outcome == Outcome::kFenced) {
        halted = true;
        Report report;
        report.kind = status.ok() ? Report::Kind::kFenced : Report::Kind::kFailed;
        report.lane = index_;
        report.status = status;
        report.generation = generation_;
        loop_.reports_.push_back(std::move(report));
      }
      loop_.reported_.notify_all();
    }
  }

  BatchLoop& loop_;
  const size_t index_;
  Store& store_;
  uint64_t generation_ = 0;  // the thread's: of the batch in hand
  std::thread thread_;
};

// ---------------------------------------------------------------------------

BatchLoop::BatchLoop(EventSource& source, const Decoder& decoder, const BatchApplier& applier,
                     Store& store, DeadLetterSink* dead_letters, BatchLoopOptions options,
                     BatchLoopHooks hooks, const std::atomic<bool>& stopping)
    : BatchLoop(source, decoder, applier, std::vector<Store*>{&store}, dead_letters, options,
                std::move(hooks), stopping) {}

BatchLoop::BatchLoop(EventSource& source, const Decoder& decoder, const BatchApplier& applier,
                     std::vector<Store*> lane_stores, DeadLetterSink* dead_letters,
                     BatchLoopOptions options, BatchLoopHooks hooks,
                     const std::atomic<bool>& stopping,
                     std::function<void(std::function<void()>)> set_rebalance_hook)
    : source_(source),
      decoder_(decoder),
      applier_(applier),
      stores_(std::move(lane_stores)),
      dead_letters_(dead_letters),
      options_(options),
      hooks_(std::move(hooks)),
      stopping_(stopping),
      set_rebalance_hook_(std::move(set_rebalance_hook)) {}

BatchLoop::~BatchLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& lane : lanes_) {
      lane->stop = true;
      lane->wake.notify_all();
    }
  }
  for (auto& lane : lanes_) lane->Join();
}

void BatchLoop::SetOptions(const BatchLoopOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  options_ = options;
}

Status BatchLoop::Run() {
  if (source_.lanes().size() != stores_.size()) {
    return Status::Fatal("the batch loop has " + std::to_string(stores_.size()) +
                         " stores for " + std::to_string(source_.lanes().size()) + " lanes");
  }
  return stores_.size() == 1 ? RunOneLane() : RunLanes();
}

Status BatchLoop::RunOneLane() {
  DirectReporter reporter(*this);
  while (!stopping_.load() && !source_.Exhausted()) {
    std::vector<RawRecord> records;
    DENORMD_RETURN_IF_ERROR(source_.Poll(std::max<size_t>(1, options_.max_events),
                                         options_.max_delay_ms, options_.idle_ms, &records));
    if (hooks_.alive) hooks_.alive();
    if (hooks_.after_poll) hooks_.after_poll();
    // What this lane applied already (a layout of several lanes ran on
    // the stream before) is skipped.
    std::vector<RawRecord> fresh;
    EventBatch batch;
    for (RawRecord& record : records) {
      AddLastPosition(record.at, &batch.last_positions);
      EventBatch scratch;
      const std::string type = DecodeRecordInto(decoder_, record, &scratch);
      if (source_.Applied(record.at, type)) continue;
      scratch.raw_count = 1;
      Merge(std::move(scratch), &batch);
      fresh.push_back(std::move(record));
    }
    if (fresh.empty()) continue;
    Outcome outcome;
    DENORMD_RETURN_IF_ERROR(
        Apply(0, *stores_[0], fresh, &batch, options_.max_attempts, reporter, &outcome));
    if (outcome == Outcome::kFenced) {
      Status reseek = source_.Reseek();
      if (!stopping_.load()) DENORMD_RETURN_IF_ERROR(reseek);
    }
  }
  return Status::Ok();
}

Status BatchLoop::Apply(size_t lane, Store& store, const std::vector<RawRecord>& records,
                        EventBatch* batch, int max_attempts, Reporter& reporter,
                        Outcome* outcome) {
  EventBatch decoded = batch != nullptr ? std::move(*batch) : DecodeBatch(decoder_, records);
  decoded.lane = source_.lanes().key(lane);
  Status status =
      ApplyWithRetry(store, records, std::move(decoded), nullptr, max_attempts, reporter,
                     outcome);
  if (!status.IsInvalidInput() || records.empty()) return status;
  if (records.size() == 1) {
    Log(LogLevel::kWarn, "record_refused",
        {{"source", records[0].at.source}, {"partition", records[0].at.partition},
         {"position", records[0].at.position}, {"reason", status.message()}});
    const std::string reason = "the store refused it: " + status.message();
    EventBatch again = DecodeBatch(decoder_, records);
    again.lane = source_.lanes().key(lane);
    return ApplyWithRetry(store, records, std::move(again), &reason, max_attempts, reporter,
                          outcome);
  }
  Log(LogLevel::kWarn, "batch_split",
      {{"records", static_cast<uint64_t>(records.size())}, {"reason", status.message()}});
  const size_t half = records.size() / 2;
  const std::vector<RawRecord> first(records.begin(), records.begin() + half);
  const std::vector<RawRecord> second(records.begin() + half, records.end());
  DENORMD_RETURN_IF_ERROR(Apply(lane, store, first, nullptr, max_attempts, reporter, outcome));
  if (*outcome != Outcome::kCommitted) return Status::Ok();  // fenced or stopping: read again
  return Apply(lane, store, second, nullptr, max_attempts, reporter, outcome);
}

Status BatchLoop::ApplyWithRetry(Store& store, const std::vector<RawRecord>& records,
                                 EventBatch batch, const std::string* refuse, int max_attempts,
                                 Reporter& reporter, Outcome* outcome) {
  if (refuse != nullptr) {
    for (const EventBatch::Item& item : batch.events) {
      batch.dead_letters.push_back({item.at, item.raw, *refuse});
    }
    batch.events.clear();
  }
  batch.previous_positions = reporter.Fence();
  *outcome = Outcome::kAbandoned;
  bool dead_letters_published = dead_letters_ == nullptr || batch.dead_letters.empty();
  const auto start = std::chrono::steady_clock::now();
  for (int attempt = 1;; ++attempt) {
    Status status;
    if (!dead_letters_published) {
      {
        std::lock_guard<std::mutex> lock(dead_letters_mu_);
        status = dead_letters_->Publish(batch.dead_letters);
      }
      dead_letters_published = status.ok();
      // The dead-letter topic is a copy: after three failed attempts the
      // batch applies without it (the dead_letters table keeps every letter).
      if (!status.ok() && attempt >= kDeadLetterAttempts) {
        Log(LogLevel::kError, "dead_letters_not_published",
            {{"letters", static_cast<uint64_t>(batch.dead_letters.size())},
             {"error", status.message()}});
        dead_letters_published = true;
        status = Status::Ok();
      }
    }
    BatchStats stats;
    if (status.ok()) status = applier_.Apply(&store, batch, &stats);
    if (status.ok()) {
      CrashPoint("batch_after_commit");
      if (attempt > 1) Log(LogLevel::kInfo, "batch_recovered", {{"attempts", attempt}});
      WarnIfTailsRendered(stats);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      reporter.Committed(records, batch, stats, seconds, attempt);
      *outcome = Outcome::kCommitted;
      return Status::Ok();
    }
    if (status.IsConflict()) {
      Log(LogLevel::kWarn, "batch_fenced", {{"error", status.message()}});
      *outcome = Outcome::kFenced;
      return Status::Ok();
    }
    const bool retry = status.IsTransient() && (max_attempts == 0 || attempt < max_attempts);
    if (!retry) return status;
    reporter.Retrying(status, attempt);
    Log(LogLevel::kWarn, "batch_retry",
        {{"attempt", attempt}, {"error", status.message()},
         {"retry_in_ms", RetryBackoffMs(attempt)}});
    Pause(RetryBackoffMs(attempt), reporter);
    if (stopping_.load() || abandon_.load()) {
      // Nothing of this batch committed; it is read again after a restart
      // (or, another lane having failed, by the next run).
      Log(LogLevel::kInfo, "batch_abandoned_for_stop", {{"attempts", attempt}});
      return Status::Ok();
    }
  }
}

// ---------------------------------------------------------------------------
// Several lanes: the loop's thread.

Status BatchLoop::RunLanes() {
  const Lanes& lanes = source_.lanes();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < lanes.size(); ++i) {
      lanes_.push_back(std::make_unique<LaneWorker>(*this, i, *stores_[i]));
      lanes_.back()->fence = source_.FencingPositions(i);
    }
  }
  if (set_rebalance_hook_) {
    set_rebalance_hook_([this] {
      Drain();
      std::lock_guard<std::mutex> lock(mu_);
      reassigned_ = true;
    });
  }
  for (auto& lane : lanes_) lane->Start();
  for (size_t i = 0; i < lanes.size(); ++i) {
    Log(LogLevel::kInfo, "lane_started", {{"lane", static_cast<uint64_t>(i)},
                                          {"types", lanes.Describe(i)}});
  }
  Status failed;
  while (!stopping_.load() && !source_.Exhausted()) {
    bool fenced = false;
    TakeReports(&failed, &fenced);
    if (!failed.ok()) break;
    if (fenced) {
      // A lane's fence failed: another consumer moved one of its streams.
      // Every lane ends its batch in hand; then all resume from the store.
      Drain();
      TakeReports(&failed, &fenced);
      if (!failed.ok()) break;
      Status reseek = source_.Reseek();
      if (!reseek.ok()) {
        if (!stopping_.load()) failed = reseek;
        break;
      }
      ResumeLanes();
    }
    bool full = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      for (const auto& lane : lanes_) {
        full = full || lane->queued_records >= std::max<size_t>(1, options_.max_events);
      }
      // A lane with its fill queued: wait for one to take it (or to report).
      if (full) reported_.wait_for(lock, std::chrono::milliseconds(20));
    }
    if (full) {
      if (hooks_.alive && LanesHealthy()) hooks_.alive();
      continue;
    }
    std::vector<RawRecord> records;
    Status polled = source_.Poll(std::max<size_t>(1, options_.max_events), options_.max_delay_ms,
                                 AnyLaneBusy() ? kBusyPollMs : options_.idle_ms, &records);
    if (!polled.ok()) {
      failed = polled;
      break;
    }
    if (hooks_.alive && LanesHealthy()) hooks_.alive();
    if (hooks_.after_poll) hooks_.after_poll();
    bool rebalanced = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      rebalanced = reassigned_;
      reassigned_ = false;
    }
    // The lanes drained in the rebalance (the hook); the records this poll
    // returned come from the new assignment, whose positions they resume.
    if (rebalanced) ResumeLanes();
    Route(records);
    AdvanceIdleLanes();
  }
  // The end of the source: what is queued is applied. Stopping (or
  // failed): the batches in hand end, what is queued is read again after a
  // restart.
  if (failed.ok() && !stopping_.load()) Settle(&failed);
  // A lane failed: the others' batches in hand end, and one retrying an
  // outage gives up at its next pause instead of holding the failure back.
  if (!failed.ok()) abandon_.store(true);
  Drain();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& lane : lanes_) {
      lane->stop = true;
      lane->wake.notify_all();
    }
  }
  for (auto& lane : lanes_) lane->Join();
  bool fenced = false;
  Status last;
  TakeReports(&last, &fenced);
  if (failed.ok()) failed = last;
  if (set_rebalance_hook_) set_rebalance_hook_(nullptr);
  return failed;
}

void BatchLoop::Route(const std::vector<RawRecord>& records) {
  if (records.empty()) return;
  const Lanes& lanes = source_.lanes();
  std::vector<LaneWorker::Work> works(lanes.size());
  for (const RawRecord& record : records) {
    EventBatch scratch;
    const std::string type = DecodeRecordInto(decoder_, record, &scratch);
    auto polled = polled_.emplace(StreamOf(record.at), record.at);
    if (!polled.second && record.at.position > polled.first->second.position) {
      polled.first->second = record.at;
    }
    if (source_.Applied(record.at, type)) continue;
    LaneWorker::Work& work = works[lanes.LaneOf(type)];
    scratch.raw_count = 1;
    Merge(std::move(scratch), &work.batch);
    work.records.push_back(record);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < works.size(); ++i) {
    if (works[i].records.empty()) continue;
    LaneWorker& lane = *lanes_[i];
    // Every stream polled past the lane's row, at the furthest position:
    // each record of the lane's types up to there is in this batch or an
    // earlier one of the lane. Not a stream the lane is ahead on (it
    // applied further than the others, which a resume reads again from):
    // its row never goes back.
    for (const auto& stream : polled_) {
      if (Behind(lane.fence, stream.second)) works[i].batch.last_positions.push_back(stream.second);
    }
    lane.queued_records += works[i].records.size();
    lane.queue.push_back(std::move(works[i]));
    lane.wake.notify_all();
  }
}

void BatchLoop::AdvanceIdleLanes() {
  const int64_t now = SteadyMillis();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& lane : lanes_) {
    if (lane->busy || lane->halted || !lane->queue.empty() ||
        now - lane->last_commit_ms < kIdleLaneAdvanceMs) {
      continue;
    }
    LaneWorker::Work work;
    for (const auto& stream : polled_) {
      if (Behind(lane->fence, stream.second)) work.batch.last_positions.push_back(stream.second);
    }
    // Checked again after a second, whether or not it had to move.
    lane->last_commit_ms = now;
    if (work.batch.last_positions.empty()) continue;
    lane->queue.push_back(std::move(work));
    lane->wake.notify_all();
  }
}

void BatchLoop::Settle(Status* failed) {
  while (!stopping_.load()) {
    bool fenced = false;
    TakeReports(failed, &fenced);
    if (!failed->ok()) return;
    if (fenced) {
      // Another consumer moved a stream: the source says what to do (a log
      // refuses to go on: a second replay of it committed meanwhile).
      Drain();
      Status reseek = source_.Reseek();
      if (!reseek.ok()) *failed = reseek;
      return;
    }
    std::unique_lock<std::mutex> lock(mu_);
    bool settled = true;
    for (const auto& lane : lanes_) settled = settled && !lane->busy && lane->queue.empty();
    if (settled) return;
    reported_.wait_for(lock, std::chrono::milliseconds(20));
  }
}

void BatchLoop::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  for (auto& lane : lanes_) {
    lane->queue.clear();
    lane->queued_records = 0;
  }
  reported_.wait(lock, [&] {
    for (const auto& lane : lanes_) {
      if (lane->busy) return false;
    }
    return true;
  });
}

void BatchLoop::ResumeLanes() {
  std::lock_guard<std::mutex> lock(mu_);
  generation_++;
  polled_.clear();
  for (size_t i = 0; i < lanes_.size(); ++i) {
    lanes_[i]->fence = source_.FencingPositions(i);
    lanes_[i]->halted = false;
    lanes_[i]->last_commit_ms = SteadyMillis();
    lanes_[i]->wake.notify_all();
  }
}

void BatchLoop::TakeReports(Status* failed, bool* fenced) {
  std::deque<Report> reports;
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reports.swap(reports_);
    generation = generation_;
  }
  for (Report& report : reports) {
    switch (report.kind) {
      case Report::Kind::kCommitted:
        // A batch of an assignment that ended: the source reloaded its
        // positions since, which hold it.
        if (report.generation == generation) source_.MarkCommitted(report.lane, report.last);
        if (hooks_.on_commit && !report.records.empty()) {
          hooks_.on_commit({report.records, report.stats, report.seconds, report.attempts,
                            report.committed_at, report.lane});
        }
        break;
      case Report::Kind::kRetrying:
        if (hooks_.on_retry) hooks_.on_retry(report.status, report.attempts);
        break;
      case Report::Kind::kFenced:
        *fenced = true;
        break;
      case Report::Kind::kFailed:
        if (failed->ok()) *failed = report.status;
        break;
    }
  }
}

bool BatchLoop::LanesHealthy() const {
  const int64_t now = SteadyMillis();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& lane : lanes_) {
    if (lane->busy && now - lane->progress_ms.load() > kLaneProgressMs) return false;
  }
  return true;
}

bool BatchLoop::AnyLaneBusy() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& lane : lanes_) {
    if (lane->busy || !lane->queue.empty()) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------

void WarnIfTailsRendered(const BatchStats& stats) {
  if (stats.tails_rendered == 0) return;
  Log(LogLevel::kWarn, "bucket_tails_rendered",
      {{"groups", stats.tails_rendered},
       {"reason", "stored buckets did not match their members (edited, or select changed "
                  "without rebuild); rendered from the entities, exact; run denormd verify"}});
}

PositionLoader LoadPositionsFrom(Store& store) {
  return [&store](const std::string& source, const std::vector<int32_t>& partitions,
                  const Lanes& lanes, std::map<int32_t, StreamProgress>* out) {
    // Twice at most: the rows the lanes start from added (another instance
    // may add them at once: the store keeps the first), then read again.
    for (int pass = 0; pass < 2; ++pass) {
      std::unique_ptr<StoreTransaction> txn;
      DENORMD_RETURN_IF_ERROR(store.Begin(&txn));
      std::vector<StoredPosition> stored;
      DENORMD_RETURN_IF_ERROR(txn->ledger().LoadPositions(source, &stored));
      std::map<int32_t, std::vector<StoredPosition>> by_partition;
      for (StoredPosition& row : stored) by_partition[row.at.partition].push_back(std::move(row));
      std::vector<StoredPosition> add;
      out->clear();
      for (int32_t partition : partitions) {
        StreamProgress progress(by_partition[partition]);
        for (StoredPosition& row : lanes.RowsToAdd({source, partition, -1}, progress)) {
          add.push_back(std::move(row));
        }
        (*out)[partition] = std::move(progress);
      }
      if (add.empty()) return Status::Ok();
      if (pass == 1) break;
      DENORMD_RETURN_IF_ERROR(txn->ledger().AddPositionRows(add));
      DENORMD_RETURN_IF_ERROR(txn->Commit());
    }
    return Status::Fatal("the position rows of " + source + "'s lanes are still missing after "
                         "they were added");
  };
}

void BatchLoop::Pause(int ms, Reporter& reporter) const {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!stopping_.load() && !abandon_.load() && std::chrono::steady_clock::now() < until) {
    reporter.Alive();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace denormd
