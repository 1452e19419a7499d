// Decoder: how the records of one input (a topic, an event log) become
// entity events, made by its format (formats/input_format.h: a format is its
// config keys, this decoder and its version rule).
//
// A decoder is pure (no I/O) and may be shared by threads.
#ifndef DENORMD_FORMATS_DECODER_H_
#define DENORMD_FORMATS_DECODER_H_

#include <vector>

#include "common/status.h"
#include "formats/record.h"
#include "projections/entity.h"
#include "projections/stream.h"

namespace denormd {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Decodes one record. Appends its events (none, one or several) to
  // *events; sets *skipped when the record carries no change on purpose (a
  // tombstone). Returns InvalidInput, with a reason a person can act on, for
  // a record that must go to the dead letters (its events are then ignored).
  virtual Status Decode(const RawRecord& record, std::vector<EntityEvent>* events,
                        bool* skipped) const = 0;
};

// Decodes raw records into a batch; never fails (bad records become dead
// letters with their reason and raw bytes).
EventBatch DecodeBatch(const Decoder& decoder, const std::vector<RawRecord>& records);

}  // namespace denormd

#endif  // DENORMD_FORMATS_DECODER_H_
