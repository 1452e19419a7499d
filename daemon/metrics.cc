#include "daemon/metrics.h"

#include <charconv>
#include <cmath>
#include <string>

namespace denormd {

namespace {

// Appends "# HELP name help\n# TYPE name type\n".
void AppendHeader(std::string* out, const char* name, const char* type, const char* help) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += help;
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

// Appends "name{labels} value\n"; `labels` is "" or already formatted as
// key="escaped",...
void AppendSample(std::string* out, const std::string& name, const std::string& labels,
                  const std::string& value) {
  *out += name;
  if (!labels.empty()) {
    *out += '{';
    *out += labels;
    *out += '}';
  }
  *out += ' ';
  *out += value;
  *out += '\n';
}

void AppendCounter(std::string* out, const char* name, const char* help,
                   const std::string& value) {
  AppendHeader(out, name, "counter", help);
  AppendSample(out, name, "", value);
}

void AppendCounter(std::string* out, const char* name, const char* help, uint64_t value) {
  AppendCounter(out, name, help, std::to_string(value));
}

void AppendGauge(std::string* out, const char* name, const char* help,
                 const std::string& value) {
  AppendHeader(out, name, "gauge", help);
  AppendSample(out, name, "", value);
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  // Shortest round-trip representation, independent of the C locale.
  std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

void Metrics::AddBatch(uint64_t applied, uint64_t stale, uint64_t dead, uint64_t written,
                       uint64_t deleted, double seconds, uint64_t skipped,
                       uint64_t round_trips, uint64_t statements) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_applied_ += applied;
  events_stale_ += stale;
  records_skipped_ += skipped;
  dead_letters_ += dead;
  documents_written_ += written;
  documents_deleted_ += deleted;
  store_round_trips_ += round_trips;
  store_statements_ += statements;
  ++batches_;
  duration_.Observe(seconds, kBatchDurationBuckets);
}

void Metrics::AddRetry() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++batch_retries_;
}

void Metrics::AddBusyRetries(uint64_t attempts, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  busy_retries_ += attempts;
  if (seconds > 0) busy_seconds_ += seconds;
}

void Metrics::SetPartitionLag(const std::string& topic, int partition, int64_t lag) {
  std::lock_guard<std::mutex> lock(mutex_);
  lag_[PartitionKey(topic, partition)] = lag;
}

void Metrics::SetLag(std::map<PartitionKey, int64_t> lags) {
  std::lock_guard<std::mutex> lock(mutex_);
  lag_.swap(lags);
}

void Metrics::SetStoreHealthy(bool healthy) {
  std::lock_guard<std::mutex> lock(mutex_);
  store_healthy_ = healthy;
}

void Metrics::SetLastCommitTimestamp(double unix_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  last_commit_timestamp_ = unix_seconds;
}

void Metrics::AddFeedPage(uint64_t published, uint64_t too_large,
                          const std::vector<double>& delays, double relay_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (relay_seconds > 0) feed_relay_seconds_ += relay_seconds;
  feed_published_ += published;
  feed_too_large_ += too_large;
  ++feed_transactions_;
  for (double delay : delays) feed_delay_.Observe(delay, kEventAgeBuckets);
}

void Metrics::AddFeedFailure() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++feed_failures_;
}

void Metrics::SetOutboxLag(uint64_t rows, double oldest_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  outbox_rows_ = rows;
  outbox_lag_seconds_ = oldest_seconds;
}

void Metrics::SetFeedRelayActive(bool active) {
  std::lock_guard<std::mutex> lock(mutex_);
  feed_relay_active_ = active;
}

void Metrics::ObserveFanOuts(const std::vector<EventFanOut>& fanouts) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const EventFanOut& fanout : fanouts) {
    fanouts_[fanout.type].Observe(static_cast<double>(fanout.documents), kFanOutBuckets);
  }
}

void Metrics::ObserveEventAges(const std::vector<double>& seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (double age : seconds) {
    age_.Observe(age, kEventAgeBuckets);
    if (age > age_max_) age_max_ = age;  // false for NaN
  }
}

namespace {

// One series of a histogram family (Metrics::Histogram); `labels`
// ("type=\"book\"") go before each bucket's le.
template <typename Histogram, size_t N>
void AppendHistogramSeries(std::string* out, const char* name, const std::string& labels,
                           const std::array<double, N>& bounds, const Histogram& h) {
  const std::string prefix = labels.empty() ? "" : labels + ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= N; ++i) {
    cumulative += h.buckets[i];
    std::string le = i < N ? FormatSampleValue(bounds[i]) : "+Inf";
    AppendSample(out, std::string(name) + "_bucket", prefix + "le=\"" + le + "\"",
                 std::to_string(cumulative));
  }
  AppendSample(out, std::string(name) + "_sum", labels, FormatSampleValue(h.sum));
  AppendSample(out, std::string(name) + "_count", labels, std::to_string(h.count));
}

template <typename Histogram, size_t N>
void AppendHistogram(std::string* out, const char* name, const char* help,
                     const std::array<double, N>& bounds, const Histogram& h) {
  AppendHeader(out, name, "histogram", help);
  AppendHistogramSeries(out, name, "", bounds, h);
}

}  // namespace

std::string Metrics::Render() const {
  // Snapshot under the lock, format outside it: writers on the batch path
  // never wait for the string building.
  uint64_t events_applied, events_stale, records_skipped, dead_letters, documents_written,
      documents_deleted, batches, batch_retries, store_round_trips, store_statements,
      busy_retries;
  double busy_seconds;
  DurationHistogram duration;
  double last_commit_timestamp;
  std::map<PartitionKey, int64_t> lag;
  bool store_healthy;
  AgeHistogram age;
  double age_max;
  uint64_t feed_published, feed_transactions, feed_too_large, feed_failures, outbox_rows;
  double feed_relay_seconds;
  AgeHistogram feed_delay;
  double outbox_lag_seconds;
  bool feed_relay_active;
  std::map<std::string, FanOutHistogram> fanouts;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fanouts = fanouts_;
    events_applied = events_applied_;
    events_stale = events_stale_;
    records_skipped = records_skipped_;
    dead_letters = dead_letters_;
    documents_written = documents_written_;
    documents_deleted = documents_deleted_;
    batches = batches_;
    batch_retries = batch_retries_;
    busy_retries = busy_retries_;
    busy_seconds = busy_seconds_;
    store_round_trips = store_round_trips_;
    store_statements = store_statements_;
    duration = duration_;
    lag = lag_;
    store_healthy = store_healthy_;
    last_commit_timestamp = last_commit_timestamp_;
    age = age_;
    age_max = age_max_;
    feed_published = feed_published_;
    feed_transactions = feed_transactions_;
    feed_too_large = feed_too_large_;
    feed_failures = feed_failures_;
    feed_relay_seconds = feed_relay_seconds_;
    feed_delay = feed_delay_;
    outbox_rows = outbox_rows_;
    outbox_lag_seconds = outbox_lag_seconds_;
    feed_relay_active = feed_relay_active_;
  }

  std::string out;
  out.reserve(4096);
  AppendCounter(&out, "denormd_events_applied_total",
                "Events applied to the projections and committed.", events_applied);
  AppendCounter(&out, "denormd_events_stale_total",
                "Events skipped because a newer version was already applied.", events_stale);
  AppendCounter(&out, "denormd_records_skipped_total",
                "Records that carry no change on purpose (Debezium tombstones), skipped.",
                records_skipped);
  AppendCounter(&out, "denormd_dead_letters_total",
                "Events that could not be applied and were sent to the dead letters.",
                dead_letters);
  AppendCounter(&out, "denormd_documents_written_total",
                "Projected documents inserted or updated in the store.", documents_written);
  AppendCounter(&out, "denormd_documents_deleted_total",
                "Projected documents deleted from the store.", documents_deleted);
  AppendCounter(&out, "denormd_batches_total", "Batches committed to the store.", batches);
  AppendCounter(&out, "denormd_batch_retries_total",
                "Batch attempts rolled back and retried after a transient error.",
                batch_retries);
  AppendCounter(&out, "denormd_batch_busy_retries_total",
                "Attempts of committed batches rolled back because another writer held a key "
                "they needed past a brief wait, and retried.",
                busy_retries);
  AppendCounter(&out, "denormd_batch_busy_seconds_total",
                "Wall time of the attempts counted in denormd_batch_busy_retries_total.",
                FormatSampleValue(busy_seconds));
  AppendCounter(&out, "denormd_store_round_trips_total",
                "Requests to the store server by committed batches, their retries included.",
                store_round_trips);
  AppendCounter(&out, "denormd_store_statements_total",
                "SQL statements sent by committed batches, their retries included.",
                store_statements);

  AppendHistogram(&out, "denormd_batch_duration_seconds",
                  "Wall time to apply and commit one batch, including retries.",
                  kBatchDurationBuckets, duration);
  AppendHistogram(&out, "denormd_event_age_seconds",
                  "Freshness: from a message's Kafka timestamp to the commit that applied it.",
                  kEventAgeBuckets, age);
  AppendGauge(&out, "denormd_event_age_max_seconds",
              "The largest denormd_event_age_seconds observed.", FormatSampleValue(age_max));
  AppendHeader(&out, "denormd_documents_per_event", "histogram",
               "Documents one change of an entity made its batch recompute, by entity type.");
  for (const auto& [type, h] : fanouts) {
    AppendHistogramSeries(&out, "denormd_documents_per_event",
                          "type=\"" + EscapeLabelValue(type) + "\"", kFanOutBuckets, h);
  }

  AppendHeader(&out, "denormd_consumer_lag", "gauge",
               "Messages between the committed offset and the end of the partition.");
  for (const auto& [key, value] : lag) {
    AppendSample(&out, "denormd_consumer_lag",
                 "topic=\"" + EscapeLabelValue(key.first) + "\",partition=\"" +
                     std::to_string(key.second) + "\"",
                 std::to_string(value));
  }

  AppendGauge(&out, "denormd_up", "1 while the daemon is running.", "1");
  AppendGauge(&out, "denormd_store_healthy",
              "1 if the last check of the store connection succeeded, else 0.",
              store_healthy ? "1" : "0");
  AppendGauge(&out, "denormd_last_commit_timestamp_seconds",
              "Unix time of the last batch committed to the store; 0 if none yet.",
              FormatSampleValue(last_commit_timestamp));

  AppendCounter(&out, "denormd_feed_published_total",
                "Document changes published on the change feed (too-large markers included).",
                feed_published);
  AppendCounter(&out, "denormd_feed_transactions_total",
                "Kafka transactions of the change feed committed.", feed_transactions);
  AppendCounter(&out, "denormd_feed_too_large_total",
                "Document changes published as a too-large marker instead of the document.",
                feed_too_large);
  AppendCounter(&out, "denormd_feed_failures_total",
                "Relay attempts that failed (broker or store away, fenced) and were retried.",
                feed_failures);
  AppendCounter(&out, "denormd_feed_relay_seconds_total",
                "Seconds the relay spent on the pages it published (reading each, unless it "
                "was read ahead, and publishing it); one a second means changes queue.",
                FormatSampleValue(feed_relay_seconds));
  AppendHistogram(&out, "denormd_feed_delay_seconds",
                  "From a document change's capture in the outbox to the Kafka commit that "
                  "published it.",
                  kEventAgeBuckets, feed_delay);
  AppendGauge(&out, "denormd_feed_outbox_rows",
              "Document changes in the outbox waiting to be published.",
              std::to_string(outbox_rows));
  AppendGauge(&out, "denormd_feed_outbox_lag_seconds",
              "Age of the oldest document change waiting in the outbox; 0 when none waits.",
              FormatSampleValue(outbox_lag_seconds));
  AppendGauge(&out, "denormd_feed_relay_active",
              "1 while this process publishes the store's change feed, else 0.",
              feed_relay_active ? "1" : "0");
  return out;
}

}  // namespace denormd
