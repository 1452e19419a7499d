#include "formats/decoder.h"

#include <map>

namespace denormd {

EventBatch DecodeBatch(const Decoder& decoder, const std::vector<RawRecord>& records) {
  EventBatch batch;
  batch.raw_count = records.size();
  std::map<std::pair<std::string, int32_t>, size_t> stream_index;
  for (const RawRecord& record : records) {
    auto inserted = stream_index.emplace(std::make_pair(record.at.source, record.at.partition),
                                         batch.last_positions.size());
    if (inserted.second) {
      batch.last_positions.push_back(record.at);
    } else {
      SourcePosition& last = batch.last_positions[inserted.first->second];
      if (record.at.position > last.position) last = record.at;
    }
    std::vector<EntityEvent> events;
    bool skipped = false;
    Status status = decoder.Decode(record, &events, &skipped);
    if (!status.ok()) {
      batch.dead_letters.push_back({record.at, record.value.value_or(""), status.message()});
      continue;
    }
    if (skipped) batch.skipped_count++;
    for (EntityEvent& event : events) batch.events.push_back({record.at, std::move(event)});
  }
  return batch;
}

}  // namespace denormd
