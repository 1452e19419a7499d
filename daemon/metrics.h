// Metrics: the daemon's fixed set of Prometheus metrics, rendered in the text
// exposition format 0.0.4 for the /metrics endpoint.
//
// This is not a generic registry: the metric set is fixed and named here, so
// that a dashboard can rely on it.
//   counters   denormd_events_applied_total, denormd_events_stale_total,
//              denormd_dead_letters_total, denormd_documents_written_total,
//              denormd_documents_deleted_total, denormd_batches_total,
//              denormd_batch_retries_total, denormd_records_skipped_total,
//              denormd_store_round_trips_total, denormd_store_statements_total,
//              denormd_batch_busy_retries_total, denormd_batch_busy_seconds_total
//   histograms denormd_batch_duration_seconds (buckets kBatchDurationBuckets),
//              denormd_event_age_seconds (kEventAgeBuckets: Kafka timestamp to
//              commit, the freshness of every applied record),
//              denormd_documents_per_event{type} (kFanOutBuckets: documents one
//              change made its batch recompute, by entity type)
//   gauges     denormd_event_age_max_seconds, denormd_consumer_lag{topic,partition},
//              denormd_up (always 1), denormd_store_healthy (0/1, 0 until
//              first set), denormd_last_commit_timestamp_seconds (0 until first set)
// The change feed's relay (0 without a feed, or while this process is not
// the store's relay):
//   counters   denormd_feed_published_total (document changes on the feed,
//              markers included), denormd_feed_transactions_total (Kafka
//              transactions committed), denormd_feed_too_large_total (changes
//              published as a too-large marker), denormd_feed_failures_total
//              (relay attempts that failed and were retried),
//              denormd_feed_relay_seconds_total (the relay's time on the
//              pages it published: near one second a second, changes queue)
//   histogram  denormd_feed_delay_seconds (kEventAgeBuckets: from a change's
//              capture in the outbox to the Kafka commit that published it)
//   gauges     denormd_feed_outbox_rows, denormd_feed_outbox_lag_seconds
//              (changes waiting in the outbox, age of the oldest; any
//              instance reports them), denormd_feed_relay_active (0/1)
//
// Thread-safety: every method may be called from any thread; one mutex guards
// all values, so Render() sees a consistent snapshot (a batch's counters and
// its histogram observation appear together).
#ifndef DENORMD_DAEMON_METRICS_H_
#define DENORMD_DAEMON_METRICS_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "projections/batch_stats.h"

namespace denormd {

class Metrics {
 public:
  // Upper bounds (seconds, inclusive) of denormd_batch_duration_seconds; the
  // +Inf bucket is implicit.
  static constexpr std::array<double, 11> kBatchDurationBuckets = {
      0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

  // Upper bounds (seconds) of denormd_event_age_seconds: from a message's
  // Kafka timestamp to the commit of the batch that applied it (freshness).
  static constexpr std::array<double, 17> kEventAgeBuckets = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15,
      0.2,   0.3,    0.5,   1,    2.5,   5,    10,    30};

  // Upper bounds (documents) of denormd_documents_per_event: the documents
  // one change made its batch recompute (BatchStats::fanouts), by type.
  static constexpr std::array<double, 14> kFanOutBuckets = {
      0, 1, 2, 5, 10, 20, 50, 100, 500, 1000, 5000, 10000, 50000, 100000};

  // (topic, partition) of a consumer-lag gauge.
  using PartitionKey = std::pair<std::string, int>;

  Metrics() = default;
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Records one committed batch: adds the counts to the counters, increments
  // denormd_batches_total and observes `seconds` (the batch's wall time,
  // including retries) in denormd_batch_duration_seconds. A NaN duration is
  // counted in denormd_batches_total but not observed; a negative one is
  // observed as 0.
  // `skipped`: records that carried no change on purpose (Debezium
  // tombstones), in denormd_records_skipped_total. `round_trips` and
  // `statements`: the batch's requests to the store and the SQL statements
  // they sent, retries included (BatchStats).
  void AddBatch(uint64_t applied, uint64_t stale, uint64_t dead, uint64_t written,
                uint64_t deleted, double seconds, uint64_t skipped = 0,
                uint64_t round_trips = 0, uint64_t statements = 0);

  // Observes what each change of a committed batch cost, in
  // denormd_documents_per_event{type=...}.
  void ObserveFanOuts(const std::vector<EventFanOut>& fanouts);

  // Observes the age at commit of each event of a committed batch, and
  // keeps the largest in denormd_event_age_max_seconds.
  void ObserveEventAges(const std::vector<double>& seconds);

  // Increments denormd_batch_retries_total (one rolled-back, retried attempt).
  void AddRetry();

  // Adds a committed batch's attempts rolled back as Busy (another writer
  // held a key it needed past a brief wait; BatchStats::busy_retries) and
  // their wall time, to denormd_batch_busy_retries_total and
  // denormd_batch_busy_seconds_total: what several instances on one store
  // cost each other besides waiting.
  void AddBusyRetries(uint64_t attempts, double seconds);

  // Sets the lag of one partition, keeping the other partitions' gauges.
  void SetPartitionLag(const std::string& topic, int partition, int64_t lag);

  // Replaces the whole set of lag gauges: partitions absent from `lags` are
  // no longer exported (e.g. after a rebalance revoked them).
  void SetLag(std::map<PartitionKey, int64_t> lags);

  // Sets denormd_store_healthy to 1 (true) or 0 (false).
  void SetStoreHealthy(bool healthy);

  // Sets denormd_last_commit_timestamp_seconds: Unix time of the last commit
  // to the store, in seconds (the caller owns the clock).
  void SetLastCommitTimestamp(double unix_seconds);

  // Records one page the relay published: `published` changes (`too_large`
  // of them as markers), one transaction, each change's delay, and the
  // seconds the page held the relay.
  void AddFeedPage(uint64_t published, uint64_t too_large, const std::vector<double>& delays,
                   double relay_seconds);
  // Increments denormd_feed_failures_total.
  void AddFeedFailure();
  // Sets the outbox gauges.
  void SetOutboxLag(uint64_t rows, double oldest_seconds);
  // Sets denormd_feed_relay_active.
  void SetFeedRelayActive(bool active);

  // The whole metric set in the Prometheus text format 0.0.4, each family
  // with its # HELP and # TYPE lines; ends with a newline.
  std::string Render() const;

 private:
  // One histogram series over bounds of size N: per-bucket counts (not
  // cumulative; the last bucket is +Inf), their sum and count.
  template <size_t N>
  struct Histogram {
    std::array<uint64_t, N + 1> buckets{};
    double sum = 0;
    uint64_t count = 0;
    // Counts `value` in the first bucket whose bound it does not exceed: a
    // NaN not at all, a negative value as 0.
    void Observe(double value, const std::array<double, N>& bounds) {
      if (std::isnan(value)) return;
      if (value < 0) value = 0;
      size_t bucket = 0;
      while (bucket < N && value > bounds[bucket]) ++bucket;
      ++buckets[bucket];
      sum += value;
      ++count;
    }
  };
  using DurationHistogram = Histogram<kBatchDurationBuckets.size()>;
  using AgeHistogram = Histogram<kEventAgeBuckets.size()>;
  using FanOutHistogram = Histogram<kFanOutBuckets.size()>;

  mutable std::mutex mutex_;
  uint64_t events_applied_ = 0;     // GUARDED_BY(mutex_)
  uint64_t events_stale_ = 0;       // GUARDED_BY(mutex_)
  uint64_t records_skipped_ = 0;    // GUARDED_BY(mutex_)
  uint64_t dead_letters_ = 0;       // GUARDED_BY(mutex_)
  uint64_t documents_written_ = 0;  // GUARDED_BY(mutex_)
  uint64_t documents_deleted_ = 0;  // GUARDED_BY(mutex_)
  uint64_t batches_ = 0;            // GUARDED_BY(mutex_)
  uint64_t batch_retries_ = 0;      // GUARDED_BY(mutex_)
  uint64_t busy_retries_ = 0;       // GUARDED_BY(mutex_)
  double busy_seconds_ = 0;         // GUARDED_BY(mutex_)
  uint64_t store_round_trips_ = 0;  // GUARDED_BY(mutex_)
  uint64_t store_statements_ = 0;   // GUARDED_BY(mutex_)
  DurationHistogram duration_;      // GUARDED_BY(mutex_)
  AgeHistogram age_;                // GUARDED_BY(mutex_)
  double age_max_ = 0;              // GUARDED_BY(mutex_)
  std::map<std::string, FanOutHistogram> fanouts_;  // by entity type; GUARDED_BY(mutex_)
  std::map<PartitionKey, int64_t> lag_;             // GUARDED_BY(mutex_)
  bool store_healthy_ = false;                      // GUARDED_BY(mutex_)
  double last_commit_timestamp_ = 0;                // GUARDED_BY(mutex_)
  uint64_t feed_published_ = 0;                     // GUARDED_BY(mutex_)
  uint64_t feed_transactions_ = 0;                  // GUARDED_BY(mutex_)
  uint64_t feed_too_large_ = 0;                     // GUARDED_BY(mutex_)
  uint64_t feed_failures_ = 0;                      // GUARDED_BY(mutex_)
  double feed_relay_seconds_ = 0;                   // GUARDED_BY(mutex_)
  AgeHistogram feed_delay_;                         // GUARDED_BY(mutex_)
  uint64_t outbox_rows_ = 0;                        // GUARDED_BY(mutex_)
  double outbox_lag_seconds_ = 0;                   // GUARDED_BY(mutex_)
  bool feed_relay_active_ = false;                  // GUARDED_BY(mutex_)
};

// A label value escaped for the text format: backslash, double quote and
// newline become \\, \" and \n. Exposed for tests.
std::string EscapeLabelValue(const std::string& value);

// A sample value as the text format writes it: the shortest decimal that
// reads back as `value`, or NaN, +Inf, -Inf. Exposed for tests.
std::string FormatSampleValue(double value);

}  // namespace denormd

#endif  // DENORMD_DAEMON_METRICS_H_
