#include "daemon/feed_relay.h"

#include <chrono>
#include <cmath>
#include <future>
#include <system_error>
#include <thread>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "common/clock.h"
#include "common/crash_point.h"
#include "common/log.h"
#include "common/retry.h"

namespace denormd {

namespace {

using Clock = std::chrono::steady_clock;

// Attempts of one page while the sink refuses messages as too large (it may
// name a few more each time); then the session restarts, keeping what it
// learnt.
constexpr int kTooLargeAttempts = 16;

// What a record batch of one message adds to its key, value and headers
// (batch header, record framing), rounded up: a message counted with it
// within feed.max_message_bytes fits a batch of that size.
constexpr uint64_t kRecordFraming = 256;

void SleepUnless(const std::atomic<bool>& stopping, int ms) {
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  while (!stopping.load() && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, 20)));
  }
}

std::string TooLargeMarker(const std::string& collection, const std::string& id, uint64_t bytes) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("denormd_too_large");
  w.StartObject();
  w.Key("collection");
  w.String(collection.data(), static_cast<rapidjson::SizeType>(collection.size()));
  w.Key("id");
  w.String(id.data(), static_cast<rapidjson::SizeType>(id.size()));
  w.Key("bytes");
  w.Uint64(bytes);
  w.EndObject();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace

std::string FeedKey(bool partitioned, const std::optional<std::string>& pk, const std::string& id) {
  if (!partitioned) return id;
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartArray();
  if (pk) {
    w.String(pk->data(), static_cast<rapidjson::SizeType>(pk->size()));
  } else {
    w.Null();
  }
  w.String(id.data(), static_cast<rapidjson::SizeType>(id.size()));
  w.EndArray();
  return std::string(buffer.GetString(), buffer.GetSize());
}

FeedRelay::FeedRelay(const Config& config, ChangeOutbox* outbox, FeedSink* sink,
                     FeedRelayHooks hooks)
    : config_(config), feed_(*config.feed), outbox_(outbox), sink_(sink), hooks_(std::move(hooks)) {}

Status FeedRelay::Start(bool* active) {
  *active = false;
  bool claimed = false;
  DENORMD_RETURN_IF_ERROR(outbox_->Claim(&claimed));
  if (!claimed) return Status::Ok();
  // The progress comes from the sink, after fencing, never from memory: a
  // page whose commit had an unknown outcome is on the feed exactly when its
  // progress is.
  FeedProgress progress;
  DENORMD_RETURN_IF_ERROR(sink_->Open(&progress));
  // Cross-checked with the store before anything is pruned: a progress
  // record that is not this store's would make the prune delete changes
  // never published.
  std::string problem;
  DENORMD_RETURN_IF_ERROR(outbox_->CheckProgress(progress.cursor, progress.sequence, &problem));
  if (!problem.empty()) {
    Log(LogLevel::kError, "feed_progress_disagrees",
        {{"progress_topic", feed_.progress_topic},
         {"transactional_id", feed_.transactional_id},
         {"problem", problem},
         {"action", "nothing pruned or published; retrying"}});
    return Status::Fatal("the feed's progress record on " + feed_.progress_topic +
                         " disagrees with the store: " + problem +
                         "; nothing was pruned or published");
  }
  progress_ = progress;
  ahead_.reset();
  DENORMD_RETURN_IF_ERROR(outbox_->Prune(progress_.cursor, progress_.sequence));
  pruned_sequence_ = progress_.sequence;
  *active = true;
  return Status::Ok();
}

std::vector<FeedMessage> FeedRelay::Messages(std::vector<OutboxRow>* rows,
                                             uint64_t first_sequence, uint64_t* too_large) const {
  std::vector<FeedMessage> out;
  std::map<std::string, std::pair<const std::string*, bool>> collections;  // topic, partitioned
  for (OutboxRow& row : *rows) {
    auto found = collections.find(row.collection);
    if (found == collections.end()) {
      found = collections
                  .emplace(row.collection, std::make_pair(feed_.TopicOf(row.collection),
                                                          config_.HasPartitionKey(row.collection)))
                  .first;
    }
    const std::string* topic = found->second.first;
    if (topic == nullptr) continue;  // no longer published (the config changed): dropped
    FeedMessage message;
    message.topic = *topic;
    message.key = FeedKey(found->second.second, row.pk, row.id);
    message.value = std::move(row.doc);  // the page is held once more, by the producer
    message.timestamp_ms = static_cast<int64_t>(std::llround(row.captured_at * 1000));
    message.outbox_seq = row.seq;
    message.headers = {{kFeedCollectionHeader, row.collection},
                       {kFeedSourceHeader, row.source},
                       {kFeedSequenceHeader, std::to_string(first_sequence + out.size())}};
    uint64_t bytes = kRecordFraming + message.key.size() + (message.value ? message.value->size() : 0);
    for (const auto& header : message.headers) bytes += header.first.size() + header.second.size();
    if (bytes > feed_.max_message_bytes || refused_.count(row.seq)) {
      message.value = TooLargeMarker(row.collection, row.id, bytes);
      message.headers.emplace_back(kFeedTooLargeHeader, std::to_string(bytes));
      ++*too_large;
    }
    out.push_back(std::move(message));
  }
  return out;
}

Status FeedRelay::FillPage(Page* page) {
  if (page->rows.size() >= feed_.max_messages) return Status::Ok();
  // Two pages read one after the other are one page: the rows after the
  // cursor, in order, and the cursor after them.
  const OutboxCursor from = page->next;  // Read's cursors must not alias
  std::vector<OutboxRow> more;
  DENORMD_RETURN_IF_ERROR(
      outbox_->Read(from, feed_.max_messages - page->rows.size(), &more, &page->next));
  page->rows.insert(page->rows.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  return Status::Ok();
}

Status FeedRelay::PruneBehind() {
  if (pruned_sequence_ == progress_.sequence) return Status::Ok();
  DENORMD_RETURN_IF_ERROR(outbox_->Prune(progress_.cursor, progress_.sequence));
  pruned_sequence_ = progress_.sequence;
  return Status::Ok();
}

Status FeedRelay::PublishBeside(const std::vector<FeedMessage>& messages,
                                const FeedProgress& after, std::vector<int64_t>* refused,
                                Status* beside) {
  std::future<Status> publishing;
  try {
    publishing = std::async(std::launch::async,
                            [&] { return sink_->Publish(messages, after, refused); });
  } catch (const std::system_error&) {
    // No thread to spare: publish here; the next Step reads its page, and
    // the prune waits for the next publish or a Step with nothing to publish.
    *beside = Status::Ok();
    return sink_->Publish(messages, after, refused);
  }
  // Pruning up to progress_ is safe while the broker commits `after`:
  // progress_ is on the feed already. The page after `after` is the one the
  // next Step would read from it; reading it now only reads it sooner.
  *beside = PruneBehind();
  Page next{{}, after.cursor};
  if (beside->ok()) *beside = FillPage(&next);
  Status status = publishing.get();
  if (status.ok() && beside->ok()) ahead_ = std::move(next);
  return status;
}

Status FeedRelay::Step(size_t* published) {
  *published = 0;
  const auto start = Clock::now();
  // A page read ahead was read when the last one began publishing; what
  // committed since follows it, and joins it here, so that reading ahead
  // never makes a change wait for one more page.
  Page page{{}, progress_.cursor};
  if (ahead_) page = std::move(*ahead_);
  ahead_.reset();
  const bool read_ahead = !page.rows.empty();
  DENORMD_RETURN_IF_ERROR(FillPage(&page));
  const auto read_done = Clock::now();
  std::vector<FeedMessage> messages;
  FeedProgress after;
  uint64_t too_large = 0;
  Status beside;
  for (int attempt = 0;; ++attempt) {
    if (page.rows.empty()) {
      // Nothing behind `next` that is not behind the cursor: moving over an
      // empty stretch needs no record on the feed. With nothing to publish,
      // the outbox is pruned up to what was.
      progress_.cursor = page.next;
      return PruneBehind();
    }
    too_large = 0;
    messages = Messages(&page.rows, progress_.sequence + 1, &too_large);
    after = {page.next, progress_.sequence + messages.size()};
    std::vector<int64_t> refused;
    Status status = PublishBeside(messages, after, &refused, &beside);
    if (status.ok()) break;
    if (!status.IsInvalidInput() || refused.empty() || attempt >= kTooLargeAttempts) return status;
    for (int64_t seq : refused) {
      refused_.insert(seq);
      Log(LogLevel::kWarn, "feed_change_too_large",
          {{"outbox_seq", seq}, {"error", status.message()},
           {"published_as", "a denormd_too_large marker"}});
    }
    // The page again (its documents moved into the messages): any read
    // from the cursor gives a valid page and the cursor after it.
    page = Page{{}, progress_.cursor};
    DENORMD_RETURN_IF_ERROR(FillPage(&page));
  }
  CrashPoint("feed_after_kafka_commit");
  progress_ = after;
  const auto published_at = Clock::now();
  const double now = UnixSeconds();
  std::vector<double> delays;
  delays.reserve(messages.size());
  for (const FeedMessage& message : messages) {
    delays.push_back(std::max(0.0, now - message.timestamp_ms / 1000.0));
  }
  *published = messages.size();
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  if (hooks_.on_published) {
    hooks_.on_published(messages.size(), too_large, delays,
                        std::chrono::duration<double>(published_at - start).count());
  }
  if (too_large > 0) {
    Log(LogLevel::kWarn, "feed_too_large_published", {{"markers", too_large}});
  }
  Log(LogLevel::kDebug, "feed_page",
      {{"changes", static_cast<uint64_t>(messages.size())}, {"sequence", progress_.sequence},
       {"read_ms", ms(read_done - start)}, {"read_ahead", read_ahead ? "yes" : "no"},
       {"publish_ms", ms(published_at - read_done)},
       {"next_read_ahead", ahead_ && !ahead_->rows.empty() ? "yes" : "no"}});
  // Pruning and reading ahead are only housekeeping: what is published is
  // what the progress says, wherever the outbox stands. A failure of either
  // still ends the session.
  return beside;
}

void FeedRelay::Run(const std::atomic<bool>& stopping) {
  bool started = false;
  bool standby_logged = false;
  int failures = 0;
  auto last_lag = Clock::now() - std::chrono::seconds(10);
  while (!stopping.load()) {
    if (hooks_.on_lag && Clock::now() - last_lag >= std::chrono::seconds(1)) {
      last_lag = Clock::now();
      OutboxLag lag;
      if (outbox_->Lag(&lag).ok()) hooks_.on_lag(lag);
    }
    Status status;
    if (!started) {
      bool active = false;
      status = Start(&active);
      if (status.ok() && !active) {
        if (!standby_logged) {
          Log(LogLevel::kInfo, "feed_relay_standby",
              {{"reason", "another relay publishes this store's feed"}});
          standby_logged = true;
        }
        sink_->Close();
        SleepUnless(stopping, 1000);
        continue;
      }
      if (status.ok()) {
        started = true;
        standby_logged = false;
        if (hooks_.on_active) hooks_.on_active(true);
        Log(LogLevel::kInfo, "feed_relay_started",
            {{"transactional_id", feed_.transactional_id},
             {"sequence", progress_.sequence},
             {"progress_topic", feed_.progress_topic}});
      }
    }
    size_t published = 0;
    if (status.ok()) status = Step(&published);
    if (!status.ok()) {
      ++failures;
      if (hooks_.on_failure) hooks_.on_failure(status);
      Log(LogLevel::kWarn, "feed_relay_retry",
          {{"attempt", failures}, {"error", status.message()},
           {"retry_in_ms", RetryBackoffMs(failures)}});
      if (started && hooks_.on_active) hooks_.on_active(false);
      started = false;
      sink_->Close();
      SleepUnless(stopping, RetryBackoffMs(failures));
      continue;
    }
    if (failures > 0) {
      Log(LogLevel::kInfo, "feed_relay_recovered", {{"attempts", failures}});
      failures = 0;
    }
    if (published == 0) SleepUnless(stopping, static_cast<int>(feed_.poll_ms));
  }
  if (started && hooks_.on_active) hooks_.on_active(false);
  sink_->Close();
}

}  // namespace denormd
