#include "daemon/fanout_recorder.h"

#include "common/log.h"

namespace denormd {

void FanOutRecorder::Observe(const std::vector<EventFanOut>& fanouts, uint64_t warn_above) {
  for (const EventFanOut& fanout : fanouts) {
    if (fanout.documents > warn_above) {
      std::string changed;
      for (const std::string& field : fanout.fields) changed += (changed.empty() ? "" : ",") + field;
      Log(LogLevel::kWarn, "fanout_large",
          {{"type", fanout.type}, {"id", fanout.id}, {"changed", changed},
           {"documents", fanout.documents}, {"fanout_warn", warn_above}});
    }
    // A change of several fields counts for each.
    for (const std::string& field : fanout.fields) {
      FanOutStat& stat = pending_[{fanout.type, field}];
      stat.type = fanout.type;
      stat.field = field;
      stat.Add({fanout.type, field, 1, fanout.documents, fanout.documents, fanout.id});
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
