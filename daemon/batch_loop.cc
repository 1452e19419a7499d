#include "daemon/batch_loop.h"

#include <chrono>
#include <thread>

#include "common/crash_point.h"
#include "common/log.h"
#include "common/retry.h"

namespace denormd {

namespace {

constexpr int kDeadLetterAttempts = 3;

}  // namespace

BatchLoop::BatchLoop(EventSource& source, const Decoder& decoder, const BatchApplier& applier,
                     Store& store, DeadLetterSink* dead_letters, BatchLoopOptions options,
                     BatchLoopHooks hooks, const std::atomic<bool>& stopping)
    : source_(source),
      decoder_(decoder),
      applier_(applier),
      store_(store),
      dead_letters_(dead_letters),
      options_(options),
      hooks_(std::move(hooks)),
      stopping_(stopping) {}

Status BatchLoop::Run() {
  while (!stopping_.load() && !source_.Exhausted()) {
    std::vector<RawRecord> records;
    DENORMD_RETURN_IF_ERROR(source_.Poll(std::max<size_t>(1, options_.max_events),
                                         options_.max_delay_ms, options_.idle_ms, &records));
    if (hooks_.alive) hooks_.alive();
    if (hooks_.after_poll) hooks_.after_poll();
    if (records.empty()) continue;
    Outcome outcome;
    DENORMD_RETURN_IF_ERROR(Apply(records, &outcome));
  }
  return Status::Ok();
}

Status BatchLoop::Apply(const std::vector<RawRecord>& records, Outcome* outcome) {
  Status status = ApplyWithRetry(records, nullptr, outcome);
  if (!status.IsInvalidInput()) return status;
  if (records.size() == 1) {
    Log(LogLevel::kWarn, "record_refused",
        {{"source", records[0].at.source}, {"partition", records[0].at.partition},
         {"position", records[0].at.position}, {"reason", status.message()}});
    const std::string reason = "the store refused it: " + status.message();
    return ApplyWithRetry(records, &reason, outcome);
  }
  Log(LogLevel::kWarn, "batch_split",
      {{"records", static_cast<uint64_t>(records.size())}, {"reason", status.message()}});
  const size_t half = records.size() / 2;
  const std::vector<RawRecord> first(records.begin(), records.begin() + half);
  const std::vector<RawRecord> second(records.begin() + half, records.end());
  DENORMD_RETURN_IF_ERROR(Apply(first, outcome));
  if (*outcome != Outcome::kCommitted) return Status::Ok();  // fenced or stopping: read again
  return Apply(second, outcome);
}

Status BatchLoop::ApplyWithRetry(const std::vector<RawRecord>& records, const std::string* refuse,
                                 Outcome* outcome) {
  EventBatch batch = DecodeBatch(decoder_, records);
  if (refuse != nullptr) {
    for (const EventBatch::Item& item : batch.events) {
      batch.dead_letters.push_back({item.at, item.raw, *refuse});
    }
    batch.events.clear();
  }
  batch.previous_positions = source_.FencingPositions();
  *outcome = Outcome::kAbandoned;
  bool dead_letters_published = dead_letters_ == nullptr;
  const auto start = std::chrono::steady_clock::now();
  for (int attempt = 1;; ++attempt) {
    Status status;
    if (!dead_letters_published) {
      status = dead_letters_->Publish(batch.dead_letters);
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
    if (status.ok()) status = applier_.Apply(&store_, batch, &stats);
    if (status.ok()) {
      CrashPoint("batch_after_commit");
      source_.MarkCommitted(batch.last_positions);
      if (attempt > 1) Log(LogLevel::kInfo, "batch_recovered", {{"attempts", attempt}});
      WarnIfTailsRendered(stats);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (hooks_.alive) hooks_.alive();
      if (hooks_.on_commit) hooks_.on_commit(records, stats, seconds, attempt);
      *outcome = Outcome::kCommitted;
      return Status::Ok();
    }
    if (status.IsConflict()) {
      Log(LogLevel::kWarn, "batch_fenced", {{"error", status.message()}});
      *outcome = Outcome::kFenced;
      Status reseek = source_.Reseek();
      return stopping_.load() ? Status::Ok() : reseek;
    }
    const bool retry = status.IsTransient() &&
                       (options_.max_attempts == 0 || attempt < options_.max_attempts);
    if (!retry) return status;
    if (hooks_.on_retry) hooks_.on_retry(status, attempt);
    Log(LogLevel::kWarn, "batch_retry",
        {{"attempt", attempt}, {"error", status.message()},
         {"retry_in_ms", RetryBackoffMs(attempt)}});
    Pause(RetryBackoffMs(attempt));
    if (stopping_.load()) {
      // Nothing of this batch committed; it is read again after a restart.
      Log(LogLevel::kInfo, "batch_abandoned_for_stop", {{"attempts", attempt}});
      return Status::Ok();
    }
  }
}

void WarnIfTailsRendered(const BatchStats& stats) {
  if (stats.tails_rendered == 0) return;
  Log(LogLevel::kWarn, "bucket_tails_rendered",
      {{"groups", stats.tails_rendered},
       {"reason", "stored buckets did not match their members (edited, or select changed "
                  "without rebuild); rendered from the entities, exact; run denormd verify"}});
}

PositionLoader LoadPositionsFrom(Store& store) {
  return [&store](const std::string& source, std::map<int32_t, int64_t>* positions) {
    std::unique_ptr<StoreTransaction> txn;
    DENORMD_RETURN_IF_ERROR(store.Begin(&txn));
    std::vector<StoredPosition> stored;
    DENORMD_RETURN_IF_ERROR(txn->ledger().LoadPositions(source, &stored));
    for (const StoredPosition& p : stored) (*positions)[p.at.partition] = p.at.position;
    return Status::Ok();
  };
}

void BatchLoop::Pause(int ms) const {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!stopping_.load() && std::chrono::steady_clock::now() < until) {
    if (hooks_.alive) hooks_.alive();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace denormd
