// Writing JSON text with RapidJSON's writer: the string and member
// helpers the reports and the store's statements share.
#ifndef DENORMD_PROJECTIONS_JSON_WRITER_H_
#define DENORMD_PROJECTIONS_JSON_WRITER_H_

#include <cstdint>
#include <string>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace denormd {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// Writes `s` as a JSON string: all its bytes, embedded NULs too (not up to
// the first one, as the char* overload would).
inline void WriteJsonString(JsonWriter& w, const std::string& s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// One member of the object being written: "key": value.
inline void WriteMember(JsonWriter& w, const char* key, const std::string& value) {
  w.Key(key);
  WriteJsonString(w, value);
}
inline void WriteMember(JsonWriter& w, const char* key, uint64_t value) {
  w.Key(key);
  w.Uint64(value);
}

}  // namespace denormd

#endif  // DENORMD_PROJECTIONS_JSON_WRITER_H_
