// PostgresStreamLedger: the StreamLedger of one PostgresTransaction, over the
// tables positions (where each stream is, with its counters), dead_letters
// and fanout_stats (the hourly fan-out statistics, kept a week).
//
// The positions and the dead letters are deferred (PostgresWork, "Round
// trips"): a batch's go with its COMMIT. The positions' fence is the
// server's own: a fenced stream that moved fails the statement, and so the
// transaction, before COMMIT runs (Conflict).
//
// Runs through the transaction's PostgresWork, which must outlive it. Not
// thread-safe.
#ifndef DENORMD_CONNECTORS_POSTGRES_STREAM_LEDGER_H_
#define DENORMD_CONNECTORS_POSTGRES_STREAM_LEDGER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "projections/store.h"

namespace denormd {

class PostgresWork;

class PostgresStreamLedger : public StreamLedger {
 public:
  explicit PostgresStreamLedger(PostgresWork& work) : work_(work) {}

  Status RecordFanOuts(const std::vector<FanOutStat>& stats) override;
  Status ReadFanOuts(uint64_t within_seconds, std::vector<FanOutStat>* out) override;
  Status LoadPositions(const std::string& source, std::vector<StoredPosition>* out) override;
  Status SavePositions(const std::vector<PositionUpdate>& updates) override;
  Status AddPositionRows(const std::vector<StoredPosition>& rows) override;
  Status AddDeadLetters(const std::vector<DeadLetter>& letters) override;

 private:
  PostgresWork& work_;
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_STREAM_LEDGER_H_
