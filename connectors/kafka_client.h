// What every librdkafka client of denormd shares: setting properties with a
// clear error, and counting failed deliveries.
#ifndef DENORMD_CONNECTORS_KAFKA_CLIENT_H_
#define DENORMD_CONNECTORS_KAFKA_CLIENT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <librdkafka/rdkafkacpp.h>

#include "common/status.h"

namespace denormd {

// Sets each property; InvalidInput naming the first one librdkafka refuses.
inline Status SetKafkaProperties(RdKafka::Conf* conf,
                                 const std::vector<std::pair<std::string, std::string>>& props) {
  std::string error;
  for (const auto& p : props) {
    if (conf->set(p.first, p.second, error) != RdKafka::Conf::CONF_OK) {
      return Status::InvalidInput("librdkafka property " + p.first + "=" + p.second + ": " +
                                  error);
    }
  }
  return Status::Ok();
}

// Counts the messages a librdkafka producer failed to deliver, from its
// delivery reports (served by poll() and flush()).
class DeliveryCounter : public RdKafka::DeliveryReportCb {
 public:
  void dr_cb(RdKafka::Message& message) override {
    if (message.err() != RdKafka::ERR_NO_ERROR) {
      failures++;
      last_error = message.errstr();
    }
  }
  uint64_t failures = 0;
  std::string last_error;
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_KAFKA_CLIENT_H_
