#include "projections/relation.h"

#include <algorithm>
#include <iterator>

#include "projections/entity.h"

namespace denormd {

namespace {

// " order [-]path", or "" without an order.
std::string OrderWords(const OrderBy* order) {
  if (order == nullptr || !order->present) return "";
  return std::string(" order ") + (order->descending ? "-" : "") + order->path.text;
}

std::string RelationName(const Path& path, const OrderBy* order, Relation::Flavour flavour) {
  std::string name = path.text + OrderWords(order);
  if (flavour == Relation::Flavour::kGroup) name += " group";
  return name;
}

}  // namespace

Relation::Relation(std::string entity_type, const Path& path, const OrderBy* order,
                   Flavour flavour)
    : entity_type_(std::move(entity_type)),
      path_(&path),
      order_(order != nullptr && order->present ? order : nullptr),
      flavour_(flavour),
      name_(RelationName(path, order, flavour)) {}

std::unique_ptr<Relation> Relation::LinkSide(std::string link_type, const Path& path,
                                             const OrderBy& other) {
  auto relation =
      std::make_unique<Relation>(std::move(link_type), path, &other, Flavour::kReferences);
  relation->name_ = path.text + " link side" + OrderWords(&other);
  relation->counted_ = false;
  return relation;
}

std::unique_ptr<Relation> Relation::Pairs(std::string link_type, const Path& from,
                                          const Path& to, const OrderBy* order) {
  auto relation = std::make_unique<Relation>(std::move(link_type), from, order, Flavour::kPairs);
  relation->to_ = &to;
  relation->name_ = from.text + " to " + to.text + " pairs" + OrderWords(relation->order_);
  relation->counted_ = false;
  return relation;
}

std::unique_ptr<Relation> Relation::Linked(std::string target_type, const Link& link,
                                           const OrderBy* order,
                                           const Relation* ordered_pairs) {
  auto relation = std::make_unique<Relation>(std::move(target_type), link.to().path(), order,
                                             Flavour::kLinked);
  relation->link_ = &link;
  relation->ordered_pairs_ = ordered_pairs;
  relation->name_ = "through " + link.link_type() + " from " + link.from().path().text + " to " +
                    link.to().path().text + OrderWords(relation->order_) +
                    (ordered_pairs != nullptr ? " of link" : "");
  return relation;
}

std::vector<std::string> Relation::Targets(const std::string& id, const JsonValue& data) const {
  switch (flavour_) {
    case Flavour::kReferences:
      return ReferenceTargets(*path_, id, data);
    case Flavour::kGroup: {
      std::optional<std::string> group = StringAt(*path_, id, data);
      if (!group) return {};
      return {std::move(*group)};
    }
    case Flavour::kPairs: {
      std::vector<std::string> pairs;
      const std::vector<std::string> to = ReferenceTargets(*to_, id, data);
      for (const std::string& from : ReferenceTargets(*path_, id, data)) {
        for (const std::string& t : to) pairs.push_back(Link::PairKey(from, t));
      }
      std::sort(pairs.begin(), pairs.end());
      return pairs;
    }
    case Flavour::kLinked:
      break;
  }
  return {};
}

std::vector<std::string> Relation::TargetsOf(const EntityState& state) const {
  if (!IsLive(state)) return {};
  return Targets(state->key.id, *state->data);
}

std::string Relation::SortKey(const std::string& id, const JsonValue& data) const {
  // A link order is of the link rows, not of this relation's entities.
  if (ordered_pairs_ != nullptr) return "";
  return denormd::SortKey(order_, id, data);
}

std::vector<std::pair<std::string, std::string>> Link::PairsOf(const EntityState& state) const {
  std::vector<std::pair<std::string, std::string>> pairs;
  const std::vector<std::string> to = to_.TargetsOf(state);
  for (const std::string& from : from_.TargetsOf(state)) {
    for (const std::string& t : to) pairs.emplace_back(from, t);
  }
  return pairs;  // sorted: both lists are
}

std::string Link::PairKey(const std::string& from, const std::string& to) {
  return std::to_string(from.size()) + ":" + from + to;
}

bool Link::SplitPairKey(const std::string& key, std::string* from, std::string* to) {
  const size_t colon = key.find(':');
  if (colon == std::string::npos || colon == 0 || colon > 10) return false;
  size_t length = 0;
  for (size_t i = 0; i < colon; ++i) {
    if (key[i] < '0' || key[i] > '9') return false;
    length = length * 10 + static_cast<size_t>(key[i] - '0');
  }
  if (key.size() - colon - 1 < length) return false;
  *from = key.substr(colon + 1, length);
  *to = key.substr(colon + 1 + length);
  return true;
}

std::vector<std::string> Link::ChangedFrom(const EntityState& before,
                                          const EntityState& after) const {
  const std::vector<std::string> from_before = from_.TargetsOf(before);
  const std::vector<std::string> from_after = from_.TargetsOf(after);
  std::vector<std::string> changed;
  if (to_.TargetsOf(before) != to_.TargetsOf(after)) {
    // Every pair of the row changed: each side it named before or after.
    std::set_union(from_before.begin(), from_before.end(), from_after.begin(), from_after.end(),
                   std::back_inserter(changed));
  } else {
    std::set_symmetric_difference(from_before.begin(), from_before.end(), from_after.begin(),
                                  from_after.end(), std::back_inserter(changed));
  }
  return changed;
}

std::vector<std::string> ReferenceTargets(const Path& path, const std::string& id,
                                          const JsonValue& data) {
  std::vector<std::string> targets;
  JsonDocument scratch_doc;
  JsonValue scratch;
  const JsonValue* value = EvalPath(path, id, data, &scratch, scratch_doc.GetAllocator());
  if (value == nullptr) return targets;
  if (value->IsString()) {
    targets.emplace_back(value->GetString(), value->GetStringLength());
  } else if (value->IsArray()) {
    for (const JsonValue& element : value->GetArray()) {
      if (element.IsString()) targets.emplace_back(element.GetString(), element.GetStringLength());
    }
    std::sort(targets.begin(), targets.end());
    targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
  }
  return targets;
}

std::optional<std::string> StringAt(const Path& path, const std::string& id,
                                    const JsonValue& data) {
  JsonDocument scratch_doc;
  JsonValue scratch;
  const JsonValue* value = EvalPath(path, id, data, &scratch, scratch_doc.GetAllocator());
  if (value == nullptr || !value->IsString()) return std::nullopt;
  return std::string(value->GetString(), value->GetStringLength());
}

std::string SortKey(const OrderBy* order, const std::string& id, const JsonValue& data) {
  if (order == nullptr || !order->present) return "";
  JsonDocument scratch_doc;
  JsonValue scratch;
  return OrderKey(EvalPath(order->path, id, data, &scratch, scratch_doc.GetAllocator()),
                  order->descending);
}

}  // namespace denormd
