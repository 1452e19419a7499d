#include "projections/lanes.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "projections/projection_plan.h"

namespace denormd {

namespace {

// Union-find over entity types.
class TypeParts {
 public:
  void Add(const std::string& type) { parent_.emplace(type, type); }
  void Join(const std::string& a, const std::string& b) {
    Add(a);
    Add(b);
    const std::string ra = Find(a), rb = Find(b);
    if (ra != rb) parent_[std::max(ra, rb)] = std::min(ra, rb);
  }
  std::string Find(const std::string& type) {
    std::string root = type;
    while (parent_.at(root) != root) root = parent_.at(root);
    return root;
  }
  // Each part's types, ascending; the parts ordered by their first type.
  std::vector<std::vector<std::string>> Parts() {
    std::map<std::string, std::vector<std::string>> by_root;
    for (const auto& entry : parent_) by_root[Find(entry.first)].push_back(entry.first);
    std::vector<std::vector<std::string>> out;
    for (auto& part : by_root) out.push_back(std::move(part.second));
    return out;
  }

 private:
  std::map<std::string, std::string> parent_;  // ordered: deterministic
};

// The parts of `plan`'s model (the types of each, ascending; ordered by
// their first type), and how many projections read each type.
std::vector<std::vector<std::string>> PartsOfModel(const ProjectionPlan& plan,
                                                   std::map<std::string, size_t>* weight) {
  const Config& config = plan.config();
  TypeParts parts;
  for (const std::string& type : config.entities) parts.Add(type);
  std::map<std::string, std::string> collection_type;  // a type writing each collection
  for (const auto& projection : plan.projections()) {
    const std::string& root = projection->unit_type();
    parts.Add(root);
    (*weight)[root]++;
    const std::string& collection = projection->config().collection;
    auto written = collection_type.emplace(collection, root);
    if (!written.second) parts.Join(written.first->second, root);
  }
  for (size_t p = 0; p < plan.projections().size(); ++p) {
    for (const std::string& type : plan.TypesRead(p)) {
      parts.Join(plan.projection(p).unit_type(), type);
    }
  }
  return parts.Parts();
}

}  // namespace

std::map<std::string, std::string> PartOfType(const ProjectionPlan& plan) {
  std::map<std::string, size_t> weight;
  std::map<std::string, std::string> out;
  for (const std::vector<std::string>& part : PartsOfModel(plan, &weight)) {
    for (const std::string& type : part) out[type] = part.front();
  }
  return out;
}

Lanes Lanes::Single(const Config& config) {
  Lanes lanes;
  std::vector<std::string> types = config.entities;
  types.push_back("");
  std::sort(types.begin(), types.end());
  types.erase(std::unique(types.begin(), types.end()), types.end());
  lanes.types_.push_back(types);
  lanes.keys_.push_back({});
  for (const std::string& type : types) lanes.lane_of_[type] = 0;
  return lanes;
}

Lanes Lanes::Of(const ProjectionPlan& plan, size_t max_lanes) {
  const Config& config = plan.config();
  std::map<std::string, size_t> weight;  // projections reading each type
  std::vector<std::vector<std::string>> found = PartsOfModel(plan, &weight);
  if (max_lanes <= 1 || found.size() <= 1) return Single(config);
  // The heaviest parts first (most projections reading them), each to the
  // lightest lane so far; ties by the part's first type, so the layout is
  // the same on every instance.
  auto part_weight = [&](const std::vector<std::string>& part) {
    size_t w = 0;
    for (const std::string& type : part) {
      auto it = weight.find(type);
      if (it != weight.end()) w += it->second;
    }
    return w;
  };
  std::stable_sort(found.begin(), found.end(),
                   [&](const std::vector<std::string>& a, const std::vector<std::string>& b) {
                     return part_weight(a) > part_weight(b);
                   });
  const size_t count = std::min(max_lanes, found.size());
  std::vector<std::set<std::string>> lane_types(count);
  std::vector<size_t> lane_weight(count, 0);
  for (const std::vector<std::string>& part : found) {
    size_t lightest = 0;
    for (size_t i = 1; i < count; ++i) {
      if (lane_weight[i] < lane_weight[lightest]) lightest = i;
    }
    lane_types[lightest].insert(part.begin(), part.end());
    lane_weight[lightest] += std::max<size_t>(1, part_weight(part));
  }
  // Lane order by first type; lane 0 takes the records of no type too.
  std::sort(lane_types.begin(), lane_types.end());
  lane_types[0].insert("");
  Lanes lanes;
  for (size_t i = 0; i < count; ++i) {
    std::vector<std::string> types(lane_types[i].begin(), lane_types[i].end());
    for (const std::string& type : types) lanes.lane_of_[type] = i;
    lanes.keys_.push_back(types);
    lanes.types_.push_back(std::move(types));
  }
  return lanes;
}

size_t Lanes::LaneOf(const std::string& type) const {
  auto it = lane_of_.find(type);
  return it == lane_of_.end() ? 0 : it->second;
}

std::string Lanes::Describe(size_t lane) const { return LaneText(types_[lane]); }

std::vector<StoredPosition> Lanes::RowsToAdd(const SourcePosition& stream,
                                             const StreamProgress& progress) const {
  std::vector<StoredPosition> out;
  if (size() == 1 && progress.empty()) return out;
  for (size_t lane = 0; lane < size(); ++lane) {
    if (progress.HasRow(keys_[lane])) continue;
    StoredPosition row;
    row.at = stream;
    row.at.position = progress.AppliedThroughAll(types_[lane]);
    row.lane = keys_[lane];
    out.push_back(std::move(row));
  }
  return out;
}

int64_t Lanes::ResumeAfter(const StreamProgress& progress) const {
  int64_t after = -1;
  for (size_t lane = 0; lane < size(); ++lane) {
    const int64_t row = progress.HasRow(keys_[lane]) ? progress.RowOf(keys_[lane])
                                                     : progress.AppliedThroughAll(types_[lane]);
    after = lane == 0 ? row : std::min(after, row);
  }
  return after;
}

}  // namespace denormd
