// PublishEventLog: sends a JSON Lines event log to a Kafka topic, one message
// per non-blank line, keyed "type:id" so that one entity's events stay in one
// partition, in order. Lines that are not valid events are sent as they are,
// without a key (the daemon sends them to dead letters).
//
// Used by `denormd publish`, the demo and the tests.
#ifndef DENORMD_CONNECTORS_KAFKA_PUBLISHER_H_
#define DENORMD_CONNECTORS_KAFKA_PUBLISHER_H_

#include <cstdint>
#include <string>

#include "common/status.h"
#include "config/config.h"

namespace denormd {

// Waits until the broker acknowledged every message (idempotent producer,
// acks=all). *published counts the messages sent.
Status PublishEventLog(const KafkaSourceConfig& kafka, const std::string& topic,
                       const std::string& path, uint64_t* published);

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_KAFKA_PUBLISHER_H_
