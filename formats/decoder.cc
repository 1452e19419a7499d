#include "formats/decoder.h"


namespace denormd {

std::string TooLargeRefusal(uint64_t bytes, uint64_t limit) {
  return "the record is " + std::to_string(bytes) + " bytes long, more than batch.max_event_bytes (" +
         std::to_string(limit) + "); the dead letter keeps its first " +
         std::to_string(kRefusedRecordBytes) + " bytes";
}

std::string DecodeRecordInto(const Decoder& decoder, const RawRecord& record, EventBatch* batch) {
  std::vector<EntityEvent> events;
  bool skipped = false;
  Status status = record.refusal.empty() ? decoder.Decode(record, &events, &skipped)
                                         : Status::InvalidInput(record.refusal);
  if (!status.ok()) {
    batch->dead_letters.push_back({record.at, record.value.value_or(""), status.message()});
    return "";
  }
  if (skipped) batch->skipped_count++;
  std::string type = events.empty() ? std::string() : events.front().key.type;
  for (EntityEvent& event : events) {
    batch->events.push_back({record.at, std::move(event), record.value.value_or("")});
  }
  return type;
}

void AddLastPosition(const SourcePosition& at, std::vector<SourcePosition>* last) {
  for (SourcePosition& known : *last) {
    if (known.partition == at.partition && known.source == at.source) {
      if (at.position > known.position) known = at;
      return;
    }
  }
  last->push_back(at);
}

EventBatch DecodeBatch(const Decoder& decoder, const std::vector<RawRecord>& records) {
  EventBatch batch;
  batch.raw_count = records.size();
  for (const RawRecord& record : records) {
    AddLastPosition(record.at, &batch.last_positions);
    DecodeRecordInto(decoder, record, &batch);
  }
  return batch;
}

}  // namespace denormd
