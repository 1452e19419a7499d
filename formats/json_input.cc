#include "formats/json_input.h"

#include <set>
#include <string_view>

namespace denormd {

namespace {

// The deepest nesting of `bytes`, found without parsing (strings skipped,
// with their escapes); stops counting past `limit`.
size_t NestingDepth(const std::string& bytes, size_t limit) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

bool HasNul(const JsonValue& value) {
  return value.IsString() && std::string_view(value.GetString(), value.GetStringLength())
                                     .find('\0') != std::string_view::npos;
}

// U+0000 anywhere, or a key twice in one object. Recursive: called only on
// documents whose depth was checked.
Status CheckValue(const JsonValue& value, size_t depth) {
  if (HasNul(value)) {
    return Status::InvalidInput("the event contains a U+0000 character, which PostgreSQL cannot store");
  }
  if (value.IsArray()) {
    for (const JsonValue& element : value.GetArray()) {
      DENORMD_RETURN_IF_ERROR(CheckValue(element, depth + 1));
    }
  } else if (value.IsObject()) {
    std::set<std::string_view> names;
    for (auto it = value.MemberBegin(); it != value.MemberEnd(); ++it) {
      if (HasNul(it->name)) {
        return Status::InvalidInput(
            "the event contains a U+0000 character, which PostgreSQL cannot store");
      }
      std::string_view name(it->name.GetString(), it->name.GetStringLength());
      if (!names.insert(name).second) {
        return Status::InvalidInput("duplicate key \"" + std::string(name.substr(0, 100)) +
                                    "\" in an object at depth " + std::to_string(depth + 1) +
                                    " (a key may appear once)");
      }
      DENORMD_RETURN_IF_ERROR(CheckValue(it->value, depth + 1));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ParseInputJson(const std::string& bytes, JsonDocument* out) {
  const size_t depth = NestingDepth(bytes, kMaxJsonDepth);
  if (depth > kMaxJsonDepth) {
    return Status::InvalidInput("the event nests deeper than " + std::to_string(kMaxJsonDepth) +
                                " levels of objects and arrays");
  }
  DENORMD_RETURN_IF_ERROR(ParseJson(bytes, out));
  return CheckValue(*out, 0);
}

}  // namespace denormd
