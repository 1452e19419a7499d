#include "projections/memory_stream_ledger.h"

#include <algorithm>

#include "common/clock.h"
#include "projections/memory_work.h"

namespace denormd {

Status MemoryStreamLedger::LoadPositions(const std::string& source,
                                         std::vector<StoredPosition>* out) {
  for (const auto& entry : work_.state().positions) {
    if (std::get<0>(entry.first) == source) out->push_back(entry.second);
  }
  return Status::Ok();
}

Status MemoryStreamLedger::SavePositions(const std::vector<PositionUpdate>& updates) {
  MemoryState& state = work_.state();
  for (const PositionUpdate& update : updates) {
    if (!update.expected_previous) continue;
    auto it = state.positions.find({update.at.source, update.at.partition, update.lane});
    int64_t stored = it == state.positions.end() ? -1 : it->second.at.position;
    if (stored != *update.expected_previous) {
      return Status::Conflict(update.at.source + " partition " +
                              std::to_string(update.at.partition) + " is at " +
                              std::to_string(stored) + ", expected " +
                              std::to_string(*update.expected_previous));
    }
  }
  for (const PositionUpdate& update : updates) {
    const auto key = std::make_tuple(update.at.source, update.at.partition, update.lane);
    work_.Remember(&state.positions, key);
    StoredPosition& stored = state.positions[key];
    stored.at = update.at;
    stored.lane = update.lane;
    stored.applied += update.applied;
    stored.stale += update.stale;
    stored.dead += update.dead;
  }
  return Status::Ok();
}

Status MemoryStreamLedger::AddPositionRows(const std::vector<StoredPosition>& rows) {
  MemoryState& state = work_.state();
  for (const StoredPosition& row : rows) {
    const auto key = std::make_tuple(row.at.source, row.at.partition, row.lane);
    if (state.positions.count(key)) continue;
    work_.Remember(&state.positions, key);
    StoredPosition& added = state.positions[key];
    added.at = row.at;
    added.lane = row.lane;
  }
  return Status::Ok();
}

Status MemoryStreamLedger::RecordFanOuts(const std::vector<FanOutStat>& stats) {
  MemoryState* state = &work_.state();
  const std::vector<FanOutStat> before = state->fanouts;
  work_.OnUndo([state, before] { state->fanouts = before; });
  for (const FanOutStat& stat : stats) {
    auto it = std::find_if(state->fanouts.begin(), state->fanouts.end(),
                           [&](const FanOutStat& s) {
                             return s.type == stat.type && s.field == stat.field;
                           });
    if (it == state->fanouts.end()) {
      state->fanouts.push_back(stat);
      continue;
    }
    it->Add(stat);
  }
  return Status::Ok();
}

Status MemoryStreamLedger::ReadFanOuts(uint64_t /*within_seconds*/,
                                       std::vector<FanOutStat>* out) {
  *out = work_.state().fanouts;
  return Status::Ok();
}

Status MemoryStreamLedger::AddDeadLetters(const std::vector<DeadLetter>& letters) {
  MemoryState* state = &work_.state();
  const size_t size = state->dead_letters.size();
  work_.OnUndo([state, size] {
    state->dead_letters.resize(size);
    state->dead_letters_received_at.resize(size);
  });
  state->dead_letters.insert(state->dead_letters.end(), letters.begin(), letters.end());
  state->dead_letters_received_at.resize(state->dead_letters.size(), UnixSeconds());
  return Status::Ok();
}

}  // namespace denormd
