// Decoder: how the records of one input (a topic, an event log) become
// entity events, made by its format (formats/input_format.h: a format is its
// config keys, this decoder and its version rule).
//
// A decoder is pure (no I/O) and may be shared by threads.
#ifndef DENORMD_FORMATS_DECODER_H_
#define DENORMD_FORMATS_DECODER_H_

#include <string>
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

// Decodes one record into `batch` (its events, its dead letter, or a skip),
// leaving the batch's positions and raw_count to the caller. Returns the
// entity type of its first event, "" when it has none (a dead letter, a
// tombstone): the type that picks its lane (projections/lanes.h).
std::string DecodeRecordInto(const Decoder& decoder, const RawRecord& record, EventBatch* batch);

// Adds `at` to the last positions of a batch: the highest per stream.
void AddLastPosition(const SourcePosition& at, std::vector<SourcePosition>* last);

}  // namespace denormd

#endif  // DENORMD_FORMATS_DECODER_H_
