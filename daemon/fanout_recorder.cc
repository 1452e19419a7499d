#include "daemon/fanout_recorder.h"

#include "common/log.h"

namespace denormd {

void FanOutRecorder::Observe(const std::vector<EventFanOut>& fanouts, uint64_t warn_above) {
  for (const EventFanOut& fanout : fanouts) {
    if (fanout.documents > warn_above) {
      Log(LogLevel::kWarn, "fanout_large",
          {{"type", fanout.type}, {"id", fanout.id}, {"changed", fanout.fields},
           {"documents", fanout.documents}, {"fanout_warn", warn_above}});
    }
    // A change of several fields counts for each.
    size_t start = 0;
    while (start <= fanout.fields.size()) {
      size_t comma = fanout.fields.find(',', start);
      if (comma == std::string::npos) comma = fanout.fields.size();
      const std::string field = fanout.fields.substr(start, comma - start);
      start = comma + 1;
      if (field.empty()) continue;
      FanOutStat& stat = pending_[{fanout.type, field}];
      stat.type = fanout.type;
      stat.field = field;
      stat.changes++;
      stat.documents += fanout.documents;
      if (fanout.documents > stat.max_documents || stat.max_id.empty()) {
        stat.max_documents = fanout.documents;
        stat.max_id = fanout.id;
      }
    }
  }
}

Status FanOutRecorder::Flush(Store* store, bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (pending_.empty() || (!force && now - last_flush_ < std::chrono::minutes(1))) {
    return Status::Ok();
  }
  std::vector<FanOutStat> stats;
  for (const auto& entry : pending_) stats.push_back(entry.second);
  std::unique_ptr<StoreTransaction> txn;
  DENORMD_RETURN_IF_ERROR(store->Begin(&txn));
  DENORMD_RETURN_IF_ERROR(txn->ledger().RecordFanOuts(stats));
  DENORMD_RETURN_IF_ERROR(txn->Commit());
  pending_.clear();
  last_flush_ = now;
  return Status::Ok();
}

}  // namespace denormd
