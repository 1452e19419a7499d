// Checks every JSON-based input format applies before and after parsing a
// record, so that no record can crash the daemon or split what the engine
// and PostgreSQL see (docs/architecture.md, "Limits and bad input").
#ifndef DENORMD_FORMATS_JSON_INPUT_H_
#define DENORMD_FORMATS_JSON_INPUT_H_

#include <cstddef>
#include <string>

#include "common/status.h"
#include "projections/json.h"
#include "projections/limits.h"

namespace denormd {

// How deeply a record's JSON may nest (objects and arrays). Deeper records
// are dead letters: they are refused before parsing, so that no recursive
// walk of the engine can run out of stack.
constexpr size_t kMaxJsonDepth = 512;

// Parses a record's JSON: refused (InvalidInput, with the reason) when it
// nests deeper than kMaxJsonDepth, is not valid JSON, holds a U+0000
// character (PostgreSQL cannot store it), or repeats a key within one object
// (the engine and jsonb would keep different values; "duplicate key "x" in
// an object at depth 2").
Status ParseInputJson(const std::string& bytes, JsonDocument* out);

}  // namespace denormd

#endif  // DENORMD_FORMATS_JSON_INPUT_H_
