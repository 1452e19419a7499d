// JSON values of entities and documents, and the operations the projection
// language needs on them: paths, templates, RFC 7396 merge patches, ordering.
//
// Entity data is held as an immutable, shared RapidJSON document (JsonPtr) so
// that one stored entity can feed many documents without copies.
#ifndef DENORMD_PROJECTIONS_JSON_H_
#define DENORMD_PROJECTIONS_JSON_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "common/status.h"
#include "config/config.h"

namespace denormd {

using JsonDocument = rapidjson::Document;
using JsonValue = rapidjson::Value;
using JsonAllocator = rapidjson::Document::AllocatorType;
using JsonPtr = std::shared_ptr<const JsonDocument>;

// A new empty document for entity data, with a small-chunk allocator.
// RapidJSON's default pool takes 64 KiB for the first value of any document;
// a batch holds thousands of small entities, so that default alone would
// cost hundreds of MiB.
std::shared_ptr<JsonDocument> NewEntityJson();

// Parses `text`. Integers keep their width (unsigned/signed, 32/64 bits);
// other numbers read as the nearest double (glibc's strtod, not RapidJSON's
// own conversion, which is wrong for some inputs); a number beyond the
// largest double is refused. On failure returns InvalidInput naming the
// error and its byte offset, and leaves `out` null.
Status ParseJson(const std::string& text, JsonDocument* out);
// Like ParseJson, returning a shared immutable document.
Status ParseJsonShared(const std::string& text, JsonPtr* out);

// Compact JSON text of a value.
std::string ToJson(const JsonValue& value);

// True when `text` cannot be written between JSON quotes as it is (it holds
// a quote, a backslash or a control character).
bool NeedsJsonEscaping(const std::string& text);

// The elements of the array at top-level key `field` of a JSON object, as
// they are spelled in `object` (no re-encoding), for JSON already known to be
// valid (documents as stored). False when `object` is not an object holding
// such an array, or `field` would need escaping; *items is then unspecified.
bool SplitArrayField(const std::string& object, const std::string& field,
                     std::vector<std::string>* items);

// Compact JSON with every object's members sorted by name: equal for equal
// values whatever their spelling (jsonb reorders keys).
std::string CanonicalJson(const JsonValue& value);

// Structural equality: objects compare as unordered maps, numbers by value.
bool JsonEquals(const JsonValue& a, const JsonValue& b);

// Applies an RFC 7396 merge patch to `target` in place.
void ApplyMergePatch(JsonValue* target, const JsonValue& patch, JsonAllocator& allocator);

// Evaluates a path against an entity: `id` is the entity's id when the path is
// the single step "id" (written into *scratch, which must outlive the result);
// otherwise the path walks `data`. Returns nullptr when the path is absent.
const JsonValue* EvalPath(const Path& path, const std::string& entity_id, const JsonValue& data,
                          JsonValue* scratch, JsonAllocator& scratch_allocator);

// Renders a template: strings as they are, other values as compact JSON,
// null or missing as "".
std::string RenderTemplate(const Template& tmpl, const std::string& entity_id,
                           const JsonValue& data);

// The sort key of a value for order_by, as bytes whose plain byte order
// (memcmp, then length; PostgreSQL's bytea order) is the order_by order:
// present values before absent ones (nullptr or JSON null) in either
// direction; numbers < strings < booleans < arrays < objects; numbers by
// value (as doubles), strings by bytes, false < true, arrays and objects all
// equal among themselves. `descending` reverses the order of present values
// and keeps absent ones last. Ties are broken by id, outside the key.
//
// The same key is stored in the reference index, so PostgreSQL can order and
// page children exactly as the engine does (see ProjectionPlan relations).
std::string OrderKey(const JsonValue* value, bool descending);

// The string an ascending OrderKey was made of; nullopt for any other key
// (of a number, an array, an absent value, or a descending order).
std::optional<std::string> StringOfOrderKey(const std::string& key);

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_JSON_H_
