#include "projections/stream.h"

#include <algorithm>

namespace denormd {

namespace {

bool Names(const LaneKey& lane, const std::string& type) {
  return std::binary_search(lane.begin(), lane.end(), type);
}

}  // namespace

std::string LaneText(const LaneKey& lane) {
  if (lane.empty()) return "(every type)";
  std::string out;
  for (const std::string& type : lane) {
    out += (out.empty() ? "" : ",") + (type.empty() ? std::string("(no type)") : type);
  }
  return out;
}

int64_t StreamProgress::AppliedThrough(const std::string& type) const {
  int64_t through = -1;
  bool named = false;  // by a lane's row
  for (const StoredPosition& row : rows_) {
    if (row.lane.empty() || Names(row.lane, type)) through = std::max(through, row.at.position);
    named = named || (!row.lane.empty() && Names(row.lane, type));
  }
  if (named || type.empty()) return through;
  // No lane named it: under every layout of lanes that ran, its records
  // were records of no type.
  return std::max(through, AppliedThrough(""));
}

int64_t StreamProgress::AppliedThroughAll(const std::vector<std::string>& types) const {
  int64_t through = -1;
  bool first = true;
  for (const std::string& type : types) {
    const int64_t applied = AppliedThrough(type);
    through = first ? applied : std::min(through, applied);
    first = false;
  }
  return through;
}

int64_t StreamProgress::RowOf(const LaneKey& lane) const {
  for (const StoredPosition& row : rows_) {
    if (row.lane == lane) return row.at.position;
  }
  return -1;
}

bool StreamProgress::HasRow(const LaneKey& lane) const {
  return std::any_of(rows_.begin(), rows_.end(),
                     [&](const StoredPosition& row) { return row.lane == lane; });
}

void StreamProgress::SetRow(const LaneKey& lane, const SourcePosition& at) {
  for (StoredPosition& row : rows_) {
    if (row.lane == lane) {
      row.at = at;
      return;
    }
  }
  StoredPosition row;
  row.at = at;
  row.lane = lane;
  rows_.push_back(std::move(row));
}

}  // namespace denormd
