// RawRecord: one record as an event source delivers it, before any format is
// applied: where it sits in its stream, and the bytes and metadata it came
// with (a Kafka message's key, headers and timestamp; a log line's text).
#ifndef DENORMD_FORMATS_RECORD_H_
#define DENORMD_FORMATS_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "projections/stream.h"

namespace denormd {

struct RawRecord {
  SourcePosition at;
  std::string topic;                   // Kafka topic ("" for an event log)
  std::optional<std::string> key;      // Kafka message key; none for a log line
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<std::string> value;    // null: a Kafka tombstone
  int64_t timestamp_ms = 0;            // Kafka message timestamp (Unix ms); 0 if none
};

}  // namespace denormd

#endif  // DENORMD_FORMATS_RECORD_H_
