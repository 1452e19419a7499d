// EntityProjection: `from: T` - one document per live entity of T: its data
// (after include/exclude), then "id", then the derived fields, each computed
// by its Derivation (projections/derivation.h).
//
// Documents of many roots are built at once: one store read per field for
// all of them, which is what lets a batch or a rebuild touch thousands of
// documents cheaply.
#ifndef DENORMD_PROJECTIONS_ENTITY_PROJECTION_H_
#define DENORMD_PROJECTIONS_ENTITY_PROJECTION_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "projections/derivation.h"
#include "projections/projection.h"

namespace denormd {

class EntityProjection : public Projection {
 public:
  using Field = std::pair<std::string, std::unique_ptr<Derivation>>;

  // `fields` in the config's order.
  EntityProjection(const ProjectionConfig& config, size_t index, std::vector<Field> fields);

  const std::string& unit_type() const override { return config().from; }
  const std::vector<Field>& fields() const { return fields_; }

  void CollectAffected(const EntityChange& change, AffectedUnits* out) const override;
  std::string LockKey(const std::string& unit) const override;
  // Its roots and what its fields read for them, for units that Recompute
  // reads in one chunk.
  void ReadAhead(StoreTransaction& txn, const std::set<std::string>& units,
                 const GroupChanges* changes) const override;
  Status Recompute(StoreTransaction& txn, const std::set<std::string>& units,
                   const GroupChanges* changes, const RelationMoves* moves,
                   BatchStats* stats) const override;
  Status VerifyFromSource(StoreTransaction& txn, SourceView& source,
                          const std::vector<std::string>& units,
                          std::vector<std::string>* differences) const override;
  Status ListDefinedUnits(StoreTransaction& txn, SourceView& source,
                          std::vector<std::string>* out) const override;
  Status ListSourceUnits(StoreTransaction& txn, const std::string& after, size_t limit,
                         std::vector<std::string>* out) const override;
  Status ListStoredUnits(StoreTransaction& txn, const std::string& after, size_t limit,
                         std::vector<std::string>* out) const override;

  // The documents of the roots `ids` (one per live root; none for the others).
  // `moves`: as in Recompute.
  Status Build(StoreTransaction& txn, const std::vector<std::string>& ids,
               const RelationMoves* moves, std::vector<DocumentRow>* out) const;

 private:
  // One field's value for a root: (field index, out, allocator) -> present.
  using FieldValue = std::function<bool(size_t field, JsonValue* out, JsonAllocator& allocator)>;
  // The document of one root, each derived field's value from `value`.
  DocumentRow Render(const EntityRecord& root, const FieldValue& value) const;

  std::vector<Field> fields_;
};

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_ENTITY_PROJECTION_H_
