// MemoryStreamLedger: the StreamLedger of one MemoryTransaction, over
// MemoryState::positions, dead_letters and fanouts (the statistics of one
// hour: the store's lifetime, whatever `within_seconds` asks). A fenced
// stream that moved fails SavePositions at once (Conflict), before it
// writes any position.
//
// Writes through the transaction's MemoryWork, which must outlive it. Not
// thread-safe.
#ifndef DENORMD_PROJECTIONS_MEMORY_STREAM_LEDGER_H_
#define DENORMD_PROJECTIONS_MEMORY_STREAM_LEDGER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "projections/store.h"

namespace denormd {

class MemoryWork;

class MemoryStreamLedger : public StreamLedger {
 public:
  explicit MemoryStreamLedger(MemoryWork& work) : work_(work) {}

  Status RecordFanOuts(const std::vector<FanOutStat>& stats) override;
  Status ReadFanOuts(uint64_t within_seconds, std::vector<FanOutStat>* out) override;
  Status LoadPositions(const std::string& source, std::vector<StoredPosition>* out) override;
  Status SavePositions(const std::vector<PositionUpdate>& updates) override;
  Status AddPositionRows(const std::vector<StoredPosition>& rows) override;
  Status AddDeadLetters(const std::vector<DeadLetter>& letters) override;

 private:
  MemoryWork& work_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_MEMORY_STREAM_LEDGER_H_
