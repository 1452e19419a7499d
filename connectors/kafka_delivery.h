// DeliveryCounter: counts the messages a librdkafka producer failed to
// deliver, from its delivery reports (served by poll() and flush()).
#ifndef DENORMD_CONNECTORS_KAFKA_DELIVERY_H_
#define DENORMD_CONNECTORS_KAFKA_DELIVERY_H_

#include <cstdint>
#include <string>

#include <librdkafka/rdkafkacpp.h>

namespace denormd {

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

#endif  // DENORMD_CONNECTORS_KAFKA_DELIVERY_H_
