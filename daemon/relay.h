// RelayThread: the change feed's relay (daemon/feed_relay.h) on a thread of
// its own, with its own PostgreSQL connection and Kafka producer, so that
// nothing it waits for (a broker away, a backlog, a message refused) delays
// the batches: they go on committing, the outbox grows, and the lag shows in
// the metrics. `denormd run` starts one when the config has a feed (unless
// --no-relay); `denormd relay` runs one alone (daemon/run.h). It publishes
// through a sink of any kind (connectors/feed_sink.h; the daemon's is
// DefaultFeedSink(), connectors/feed_sink_registry.h).
#ifndef DENORMD_DAEMON_RELAY_H_
#define DENORMD_DAEMON_RELAY_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "config/config.h"
#include "connectors/feed_sink.h"
#include "connectors/postgres_outbox.h"
#include "daemon/feed_relay.h"
#include "daemon/metrics.h"

namespace denormd {

class RelayThread {
 public:
  // `config` (with a feed) and `metrics` must outlive the thread; the
  // relay publishes through a sink of kind `sink`, made here.
  RelayThread(const Config& config, const std::string& postgres, const FeedSinkKind& sink,
              Metrics* metrics);
  ~RelayThread();  // Stop()
  RelayThread(const RelayThread&) = delete;
  RelayThread& operator=(const RelayThread&) = delete;

  void Start();
  // Asks the relay to stop and waits for it (a Kafka call in flight ends
  // within a few seconds). Idempotent.
  void Stop();

 private:
  std::atomic<bool> stopping_{false};
  PostgresOutbox outbox_;
  std::unique_ptr<FeedSink> sink_;
  FeedRelay relay_;
  std::thread thread_;
};

// The relay's hooks feeding `metrics`.
FeedRelayHooks MetricsHooks(Metrics* metrics);

}  // namespace denormd

#endif  // DENORMD_DAEMON_RELAY_H_
