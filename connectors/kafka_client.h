// What every librdkafka client of denormd shares: its base configuration
// (bootstrap servers, a client id, the user's source.kafka.properties),
// setting properties with a clear error, routing librdkafka's log into
// denormd's, and counting failed deliveries.
#ifndef DENORMD_CONNECTORS_KAFKA_CLIENT_H_
#define DENORMD_CONNECTORS_KAFKA_CLIENT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <librdkafka/rdkafkacpp.h>

#include "common/status.h"
#include "config/config.h"

namespace denormd {

// Sets each property; InvalidInput naming the first one librdkafka refuses.
Status SetKafkaProperties(RdKafka::Conf* conf,
                          const std::vector<std::pair<std::string, std::string>>& props);

// Properties every denormd client sets: bootstrap servers and a client id.
Status SetBaseKafkaProperties(const KafkaSourceConfig& kafka, RdKafka::Conf* conf);

// The user's source.kafka.properties (SASL, TLS, tuning), applied to every
// client after denormd's own: consumer, dead-letter producer, `publish`,
// `status`.
Status SetUserKafkaProperties(const KafkaSourceConfig& kafka, RdKafka::Conf* conf);

// Routes librdkafka's errors and log lines into denormd's structured log.
// Repeated identical errors (a broker that stays down) are logged once per
// change, not once per retry.
class KafkaLogger : public RdKafka::EventCb {
 public:
  void event_cb(RdKafka::Event& event) override;
  void Reset() { last_error_.clear(); }

 private:
  std::string last_error_;
};

// Counts the messages a librdkafka producer failed to deliver, from its
// delivery reports (served by poll() and flush()), and keeps the opaque
// pointer and error of each.
class DeliveryCounter : public RdKafka::DeliveryReportCb {
 public:
  void dr_cb(RdKafka::Message& message) override {
    if (message.err() != RdKafka::ERR_NO_ERROR) {
      failures++;
      last_error = message.errstr();
      failed.emplace_back(message.msg_opaque(), message.err());
    }
  }
  void Reset() {
    failures = 0;
    last_error.clear();
    failed.clear();
  }
  uint64_t failures = 0;
  std::string last_error;
  std::vector<std::pair<void*, RdKafka::ErrorCode>> failed;
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_KAFKA_CLIENT_H_
