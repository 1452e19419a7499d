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
  // Set by a source that refuses the record as read (too large: `value` then
  // holds only its start): it becomes a dead letter with this reason.
  std::string refusal;
};

// The most of a refused record's bytes a dead letter keeps.
constexpr size_t kRefusedRecordBytes = 64 * 1024;

// The refusal of a record of `bytes` over a limit of `limit` bytes.
std::string TooLargeRefusal(uint64_t bytes, uint64_t limit);

}  // namespace denormd

#endif  // DENORMD_FORMATS_RECORD_H_
