// Scalar expressions and selections: the parts of the language that read one
// entity only (a path, a "{template}", {value: ...}, and `select`, which says
// what a relation copies from each related entity).
#ifndef DENORMD_PROJECTIONS_SELECTION_H_
#define DENORMD_PROJECTIONS_SELECTION_H_

#include <string>

#include "config/config.h"
#include "projections/entity.h"
#include "projections/json.h"

namespace denormd {

// Evaluates a path, template or literal against one entity into *out.
// Returns false when the value is missing (the field is then left out), and
// for derived expressions, which have no scalar value.
bool EvalScalar(const Expression& expression, const std::string& id, const JsonValue& data,
                JsonValue* out, JsonAllocator& allocator);

// What a relation copies from one related entity (select applied), as JSON.
void ApplySelection(const Selection& selection, const std::string& id, const JsonValue& data,
                    JsonValue* out, JsonAllocator& allocator);

// Whether what `selection` copies of an entity differs between two states
// (a state that is not live copies nothing).
bool SelectionChanged(const Selection& selection, const EntityState& before,
                      const EntityState& after);

// Adds a member `name` to a JSON object.
void AddMember(JsonValue* object, const std::string& name, JsonValue& value,
               JsonAllocator& allocator);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_SELECTION_H_
