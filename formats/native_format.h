// The native event format (docs/configuration.md, "Events"): one JSON object per
// Kafka message value or log line,
//   {"type": "book", "id": "b1", "op": "upsert"|"patch"|"delete",
//    "version": 7, "data": {...}}
// validated against the configured entity types. Its version rule: the
// event's own "version" (an event without one always applies). A tombstone
// (a Kafka message without a value) is a dead letter. The default format:
// event logs and topics given by name alone are read in it. It has no config
// keys; NativeFormat() in native_format.cc is its entry in
// formats/format_registry.cc.
#ifndef DENORMD_FORMATS_NATIVE_FORMAT_H_
#define DENORMD_FORMATS_NATIVE_FORMAT_H_

#include <string>
#include <vector>

#include "config/config.h"
#include "formats/decoder.h"

namespace denormd {

class NativeDecoder : public Decoder {
 public:
  // Borrows `config`, which must outlive the decoder.
  explicit NativeDecoder(const Config& config) : config_(config) {}
  Status Decode(const RawRecord& record, std::vector<EntityEvent>* events,
                bool* skipped) const override;

 private:
  const Config& config_;
};

// Decodes one native event; InvalidInput with the reason when it is not one
// ("field \"version\" must be an unsigned 64-bit integer").
Status DecodeNativeEvent(const Config& config, const std::string& bytes, EntityEvent* out);

}  // namespace denormd

#endif  // DENORMD_FORMATS_NATIVE_FORMAT_H_
