#include "daemon/relay.h"

namespace denormd {

FeedRelayHooks MetricsHooks(Metrics* metrics) {
  FeedRelayHooks hooks;
  hooks.on_published = [metrics](uint64_t published, uint64_t too_large,
                                 const std::vector<double>& delays, double relay_seconds) {
    metrics->AddFeedPage(published, too_large, delays, relay_seconds);
  };
  hooks.on_failure = [metrics](const Status&) { metrics->AddFeedFailure(); };
  hooks.on_lag = [metrics](const OutboxLag& lag) {
    metrics->SetOutboxLag(lag.rows, lag.oldest_seconds);
  };
  hooks.on_active = [metrics](bool active) { metrics->SetFeedRelayActive(active); };
  return hooks;
}

RelayThread::RelayThread(const Config& config, const std::string& postgres,
                         const FeedSinkKind& sink, Metrics* metrics)
    : outbox_(config, postgres),
      sink_(sink.Make(config, &stopping_)),
      relay_(config, &outbox_, sink_.get(), MetricsHooks(metrics)) {}

RelayThread::~RelayThread() { Stop(); }

void RelayThread::Start() {
  if (thread_.joinable()) return;
  stopping_.store(false);
  thread_ = std::thread([this] { relay_.Run(stopping_); });
}

void RelayThread::Stop() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
}

}  // namespace denormd
