#include "projections/projection_plan.h"

#include <algorithm>
#include <tuple>

#include "projections/buckets/bucket_projection.h"
#include "projections/derivations/registry.h"
#include "projections/entity_projection.h"

namespace denormd {

// Binds the fields of one projection at a time; relations are interned in
// the plan.
//
// A relation read in no particular order (count, ids, a lookup's fan-out:
// each reads members or counts, and sorts what it shows itself) is the same
// set of rows as one with an order on the same path: when the config has
// such an ordered relation, those reads use it, and each entity keeps one
// index row per path instead of two. A use that shows its members in an
// order (embed, buckets) always gets the relation of exactly that order, by
// id when it has no `order_by`: it never borrows another's. The same holds
// for a link's pairs: the pairs a link row names are kept by its pair
// relation in a link order when a field keeps one. A link's sides are
// relations of their own (Relation::LinkSide), never shared. The plan is
// therefore built twice: the first pass only records which ordered
// relations exist (`carriers`).
class ProjectionPlan::Builder : public PlanBuilder {
 public:
  using CarrierKey = std::tuple<std::string, std::string, Relation::Flavour>;

  // Without `carriers`: the recording pass.
  Builder(ProjectionPlan* plan, const std::map<CarrierKey, const OrderBy*>* carriers)
      : plan_(plan), carriers_(carriers) {}

  const std::map<CarrierKey, const OrderBy*>& recorded() const { return recorded_; }

  void Start(const ProjectionConfig& projection, size_t index) {
    projection_ = &projection;
    index_ = index;
    field_.clear();
  }
  const ProjectionConfig& projection() const override { return *projection_; }
  size_t projection_index() const override { return index_; }
  void StartField(const std::string& field) { field_ = field; }
  const std::string& field() const override { return field_; }

  const Relation& UseRelation(const std::string& entity_type, const Path& path,
                              const OrderBy* order, Relation::Flavour flavour) override {
    const CarrierKey key{entity_type, path.text, flavour};
    const bool ordered = order != nullptr && order->present;
    if (ordered) recorded_.emplace(key, order);
    if (order == nullptr && carriers_ != nullptr) {  // any order will do
      auto carrier = carriers_->find(key);
      if (carrier != carriers_->end()) order = carrier->second;
    }
    const Relation& relation = Intern(std::make_unique<Relation>(entity_type, path, order, flavour));
    RecordUse(&relation, nullptr);
    return relation;
  }

  const Link& UseLink(const std::string& link_type, const Path& from, const Path& to) override {
    // Each side in the order of the other side's value: a row names both
    // ids, so the link rows naming an id give the other ids keys only
    // (ReadLinksTo). Not a carrier, nor carried: a side keeps no counters.
    const Relation& from_relation = Intern(Relation::LinkSide(link_type, from, SideOrder(to)));
    const Relation& to_relation = Intern(Relation::LinkSide(link_type, to, SideOrder(from)));
    const Link* found = nullptr;
    for (const auto& link : plan_->links_) {
      if (&link->from() == &from_relation && &link->to() == &to_relation) found = link.get();
    }
    if (found == nullptr) {
      // The link's pairs when a field keeps them in a link order; none
      // otherwise: the `from` side tells whether a pair is linked.
      const Relation* pairs = nullptr;
      if (carriers_ != nullptr) {
        auto carrier = carriers_->find(PairsKey(link_type, from, to));
        if (carrier != carriers_->end()) {
          pairs = &Intern(Relation::Pairs(link_type, from, to, carrier->second));
        }
      }
      plan_->links_.push_back(std::make_unique<Link>(from_relation, to_relation, pairs));
      found = plan_->links_.back().get();
    }
    RecordUse(nullptr, found);
    return *found;
  }

  const Relation& UseLinkedRelation(const Link& link, const std::string& target_type,
                                    const OrderBy* order, const OrderBy* link_order) override {
    const bool by_link = link_order != nullptr && link_order->present;
    if (by_link) {
      recorded_.emplace(PairsKey(link.link_type(), link.from().path(), link.to().path()),
                        link_order);
    }
    const Relation* pairs =
        by_link ? &Intern(Relation::Pairs(link.link_type(), link.from().path(), link.to().path(),
                                          link_order))
                : nullptr;
    const Relation& relation =
        Intern(Relation::Linked(target_type, link, by_link ? link_order : order, pairs));
    std::vector<const Relation*>& linked = plan_->linked_relations_;
    if (std::find(linked.begin(), linked.end(), &relation) == linked.end()) {
      linked.push_back(&relation);
    }
    return relation;
  }

 private:
  // The ascending order of `path`'s value, kept by the plan: the link sides
  // (Relation::LinkSide) borrow it.
  const OrderBy& SideOrder(const Path& path) {
    for (const auto& order : plan_->side_orders_) {
      if (order->path.text == path.text) return *order;
    }
    auto order = std::make_unique<OrderBy>();
    order->present = true;
    order->path = path;
    plan_->side_orders_.push_back(std::move(order));
    return *plan_->side_orders_.back();
  }

  // The carrier key of a link's pair relations (kPairs: from and to).
  static CarrierKey PairsKey(const std::string& link_type, const Path& from, const Path& to) {
    return {link_type, from.text + "\n" + to.text, Relation::Flavour::kPairs};
  }

  void RecordUse(const Relation* relation, const Link* link) {
    for (const RelationUse& use : plan_->relation_uses_) {
      if (use.projection == index_ && use.field == field_ && use.relation == relation &&
          use.link == link) {
        return;
      }
    }
    plan_->relation_uses_.push_back({index_, field_, relation, link});
  }

  // The plan's relation named like `relation`: the one already kept, or
  // this one, now kept.
  const Relation& Intern(std::unique_ptr<Relation> relation) {
    std::vector<const Relation*>& relations = plan_->types_[relation->entity_type()].relations;
    for (const Relation* existing : relations) {
      if (existing->name() == relation->name()) return *existing;
    }
    relations.push_back(relation.get());
    plan_->relations_.push_back(std::move(relation));
    return *plan_->relations_.back();
  }

  ProjectionPlan* plan_;
  const std::map<CarrierKey, const OrderBy*>* carriers_;
  std::map<CarrierKey, const OrderBy*> recorded_;  // first ordered relation per key
  const ProjectionConfig* projection_ = nullptr;
  size_t index_ = 0;
  std::string field_;
};

ProjectionPlan::ProjectionPlan(const Config& config, PlanOptions options) : config_(config) {
  Builder recorder(this, nullptr);
  Build(recorder, options);
  const std::map<Builder::CarrierKey, const OrderBy*> carriers = recorder.recorded();
  projections_.clear();
  links_.clear();
  linked_relations_.clear();
  relation_uses_.clear();
  relations_.clear();
  types_.clear();
  types_read_.clear();
  Builder builder(this, &carriers);
  Build(builder, options);
}

void ProjectionPlan::Build(Builder& builder, const PlanOptions& options) {
  const Config& config = config_;
  for (size_t p = 0; p < config.projections.size(); ++p) {
    const ProjectionConfig& projection = config.projections[p];
    builder.Start(projection, p);
    std::vector<std::string> read;
    if (projection.kind == ProjectionConfig::Kind::kBuckets) {
      projections_.push_back(
          std::make_unique<BucketProjection>(projection, p, builder, options.bucket_page_rows));
    } else {
      std::vector<EntityProjection::Field> fields;
      for (const auto& field : projection.fields) {
        const Expression& expression = field.second;
        builder.StartField(field.first);
        std::unique_ptr<Derivation> derivation;
        if (expression.kind == Expression::Kind::kDerived) {
          // Every spec of a parsed Config was made by a registered kind.
          derivation = FindDerivationKind(expression.derivation)->Bind(*expression.spec, builder);
          for (const std::string& type : derivation->DependsOn()) {
            types_[type].dependents.push_back(derivation.get());
            read.push_back(type);
          }
        } else {
          derivation = ScalarField(expression);
        }
        fields.emplace_back(field.first, std::move(derivation));
      }
      projections_.push_back(std::make_unique<EntityProjection>(projection, p, std::move(fields)));
    }
    types_[projections_.back()->unit_type()].projections.push_back(projections_.back().get());
    read.push_back(projections_.back()->unit_type());
    std::sort(read.begin(), read.end());
    read.erase(std::unique(read.begin(), read.end()), read.end());
    types_read_.push_back(std::move(read));
  }
}

ProjectionPlan::~ProjectionPlan() = default;

std::vector<ReferenceRow> ProjectionPlan::ReferenceRowsOf(const EntityRecord& record) const {
  std::vector<ReferenceRow> rows;
  if (!record.live()) return rows;
  for (const Relation* relation : ForType(record.key.type).relations) {
    std::vector<std::string> targets = relation->Targets(record.key.id, *record.data);
    if (targets.empty()) continue;
    std::string sort = relation->SortKey(record.key.id, *record.data);
    for (std::string& target : targets) rows.push_back({relation, std::move(target), sort});
  }
  return rows;
}

std::string ProjectionPlan::IndexFingerprint() const {
  std::string out;
  for (const auto& type : types_) {
    if (type.second.relations.empty()) continue;
    out += type.first + ":";
    std::vector<std::string> names;
    for (const Relation* relation : type.second.relations) names.push_back(relation->name());
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) out += " [" + name + "]";
    out += "\n";
  }
  return out;
}

const EntityTypePlan& ProjectionPlan::ForType(const std::string& type) const {
  auto it = types_.find(type);
  return it == types_.end() ? empty_ : it->second;
}

}  // namespace denormd
