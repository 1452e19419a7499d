#include "projections/json.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <locale.h>

#include <rapidjson/encodedstream.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace denormd {

std::shared_ptr<JsonDocument> NewEntityJson() {
  struct Holder {
    rapidjson::MemoryPoolAllocator<> allocator{1024};
    JsonDocument document{&allocator};
  };
  auto holder = std::make_shared<Holder>();
  return std::shared_ptr<JsonDocument>(holder, &holder->document);  // shares the holder
}

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The code unit of the backslash-u escape at text[at] (6 bytes), or -1.
int EscapedCodeUnit(const std::string& text, size_t at) {
  if (at + 6 > text.size() || text[at] != '\\' || text[at + 1] != 'u') return -1;
  int unit = 0;
  for (size_t k = at + 2; k < at + 6; ++k) {
    const int digit = HexDigit(text[k]);
    if (digit < 0) return -1;
    unit = unit * 16 + digit;
  }
  return unit;
}

// The offset of an escape of a low surrogate (DC00-DFFF) that does not
// follow the escape of a high one, or npos. RapidJSON 1.1 refuses a high
// surrogate without its low half but encodes a lone low one as the 3 bytes
// ED B0..BF xx, which are not UTF-8: PostgreSQL would refuse the document and
// two equal documents would compare unequal. Only called on text that parsed,
// where a backslash can only be inside a string, starting an escape.
size_t FindLoneLowSurrogate(const std::string& text) {
  for (size_t at = text.find('\\'); at != std::string::npos; at = text.find('\\', at)) {
    const int unit = EscapedCodeUnit(text, at);
    if (unit >= 0xD800 && unit <= 0xDBFF) {
      at += 12;  // the pair, which the parser has checked
    } else if (unit >= 0xDC00 && unit <= 0xDFFF) {
      return at;
    } else {
      at += 2;  // any other escape, including "\\"
    }
  }
  return std::string::npos;
}

// The C locale, for strtod_l: a number's decimal point is '.' whatever the
// process's LC_NUMERIC.
locale_t CLocale() {
  static const locale_t c = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(nullptr));
  return c;
}

// A RapidJSON SAX handler that builds `document` and reads every number
// itself. RapidJSON 1.1's own full-precision conversion gives wrong values
// for some inputs (Debian's 1.1.0, optimized build): 0.184467440737095516159
// reads as -6.5e-201 (upstream fixed it in 2024, Tencent/rapidjson#2326), a
// zero written with more than 22 decimals as -1.7e-195 (both after an
// undefined clz(0); found by Fuzz.EventDecoderAndEngine under UBSan), and
// 1.8e308 as NaN. So the reader hands over each number's text
// (kParseNumbersAsStringsFlag), already checked against the JSON grammar,
// and this converts it:
// - an integer kept as RapidJSON keeps it: unsigned (32 or 64 bits) when
//   not negative, signed when negative ("-0" is the integer 0), a double
//   only beyond 64 bits;
// - anything else with glibc's correctly rounded strtod; a value beyond the
//   largest double is refused (`too_big`), one below the smallest becomes
//   a subnormal or zero.
class NumberReadingHandler {
 public:
  explicit NumberReadingHandler(JsonDocument* document) : document_(*document) {}

  bool RawNumber(const char* text, rapidjson::SizeType length, bool /*copy*/) {
    const char* digits = text[0] == '-' ? text + 1 : text;
    const char* end = text + length;
    const bool negative = digits != text;
    if (std::find_if(digits, end, [](char c) { return c < '0' || c > '9'; }) == end) {
      uint64_t magnitude = 0;
      const char* at = digits;
      for (; at < end; ++at) {
        const uint64_t digit = static_cast<uint64_t>(*at - '0');
        if (magnitude > (UINT64_MAX - digit) / 10) break;
        magnitude = magnitude * 10 + digit;
      }
      if (at == end && !negative) {
        return magnitude <= UINT32_MAX ? document_.Uint(static_cast<unsigned>(magnitude))
                                       : document_.Uint64(magnitude);
      }
      if (at == end && magnitude <= (uint64_t{1} << 31)) {
        return document_.Int(static_cast<int>(-static_cast<int64_t>(magnitude)));
      }
      if (at == end && magnitude <= (uint64_t{1} << 63)) {
        return document_.Int64(static_cast<int64_t>(~magnitude + 1));
      }
    }
    // The reader's copy of the number ends with a NUL.
    const double value = strtod_l(text, nullptr, CLocale());
    if (!std::isfinite(value)) {
      too_big = true;
      return false;
    }
    return document_.Double(value);
  }

  bool Null() { return document_.Null(); }
  bool Bool(bool b) { return document_.Bool(b); }
  bool Int(int i) { return document_.Int(i); }
  bool Uint(unsigned u) { return document_.Uint(u); }
  bool Int64(int64_t i) { return document_.Int64(i); }
  bool Uint64(uint64_t u) { return document_.Uint64(u); }
  bool Double(double d) { return document_.Double(d); }
  bool String(const char* s, rapidjson::SizeType length, bool copy) {
    return document_.String(s, length, copy);
  }
  bool StartObject() { return document_.StartObject(); }
  bool Key(const char* s, rapidjson::SizeType length, bool copy) {
    return document_.Key(s, length, copy);
  }
  bool EndObject(rapidjson::SizeType members) { return document_.EndObject(members); }
  bool StartArray() { return document_.StartArray(); }
  bool EndArray(rapidjson::SizeType elements) { return document_.EndArray(elements); }

  bool too_big = false;  // a number was refused: beyond the largest double

 private:
  JsonDocument& document_;
};

}  // namespace

Status ParseJson(const std::string& text, JsonDocument* out) {
  rapidjson::ParseResult result;
  bool too_big = false;
  auto parse = [&](JsonDocument& document) {
    NumberReadingHandler handler(&document);
    rapidjson::MemoryStream bytes(text.data(), text.size());
    rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> input(bytes);
    rapidjson::Reader reader;
    // Iterative: no input can exhaust the stack while parsing.
    result = reader.Parse<rapidjson::kParseNumbersAsStringsFlag | rapidjson::kParseValidateEncodingFlag |
                          rapidjson::kParseIterativeFlag>(input, handler);
    too_big = handler.too_big;
    return !result.IsError();
  };
  out->Populate(parse);
  if (result.IsError()) {
    out->SetNull();
    const rapidjson::ParseErrorCode code =
        too_big && result.Code() == rapidjson::kParseErrorTermination ? rapidjson::kParseErrorNumberTooBig
                                                                       : result.Code();
    // RapidJSON says "Invalid value." : "not valid JSON at byte 53: invalid value".
    std::string reason = rapidjson::GetParseError_En(code);
    if (!reason.empty() && reason.back() == '.') reason.pop_back();
    if (!reason.empty()) reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
    return Status::InvalidInput("not valid JSON at byte " + std::to_string(result.Offset()) + ": " +
                                reason);
  }
  const size_t lone = FindLoneLowSurrogate(text);
  if (lone != std::string::npos) {
    out->SetNull();
    return Status::InvalidInput("not valid JSON: the escape " + text.substr(lone, 6) +
                                " is half of a UTF-16 surrogate pair, at byte " +
                                std::to_string(lone));
  }
  return Status::Ok();
}

Status ParseJsonShared(const std::string& text, JsonPtr* out) {
  auto doc = NewEntityJson();
  DENORMD_RETURN_IF_ERROR(ParseJson(text, doc.get()));
  *out = std::move(doc);
  return Status::Ok();
}

std::string ToJson(const JsonValue& value) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  value.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

namespace {

void WriteCanonical(const JsonValue& value, rapidjson::Writer<rapidjson::StringBuffer>* w) {
  if (value.IsObject()) {
    std::vector<const JsonValue::Member*> members;
    for (auto it = value.MemberBegin(); it != value.MemberEnd(); ++it) members.push_back(&*it);
    std::sort(members.begin(), members.end(), [](const JsonValue::Member* a, const JsonValue::Member* b) {
      return std::string(a->name.GetString(), a->name.GetStringLength()) <
             std::string(b->name.GetString(), b->name.GetStringLength());
    });
    w->StartObject();
    for (const JsonValue::Member* member : members) {
      w->Key(member->name.GetString(), member->name.GetStringLength());
      WriteCanonical(member->value, w);
    }
    w->EndObject();
  } else if (value.IsArray()) {
    w->StartArray();
    for (const JsonValue& element : value.GetArray()) WriteCanonical(element, w);
    w->EndArray();
  } else {
    value.Accept(*w);
  }
}

}  // namespace

std::string CanonicalJson(const JsonValue& value) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  WriteCanonical(value, &writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

bool JsonEquals(const JsonValue& a, const JsonValue& b) {
  if (a.IsNumber() && b.IsNumber()) {
    if (a.IsDouble() || b.IsDouble()) return a.GetDouble() == b.GetDouble();
    if (a.IsUint64() && b.IsUint64()) return a.GetUint64() == b.GetUint64();
    if (a.IsInt64() && b.IsInt64()) return a.GetInt64() == b.GetInt64();
    return false;
  }
  if (a.GetType() != b.GetType()) return false;
  switch (a.GetType()) {
    case rapidjson::kObjectType: {
      if (a.MemberCount() != b.MemberCount()) return false;
      for (auto it = a.MemberBegin(); it != a.MemberEnd(); ++it) {
        auto other = b.FindMember(it->name);
        if (other == b.MemberEnd() || !JsonEquals(it->value, other->value)) return false;
      }
      return true;
    }
    case rapidjson::kArrayType: {
      if (a.Size() != b.Size()) return false;
      for (rapidjson::SizeType i = 0; i < a.Size(); ++i) {
        if (!JsonEquals(a[i], b[i])) return false;
      }
      return true;
    }
    default:
      return a == b;
  }
}

void ApplyMergePatch(JsonValue* target, const JsonValue& patch, JsonAllocator& allocator) {
  if (!patch.IsObject()) {
    target->CopyFrom(patch, allocator);
    return;
  }
  if (!target->IsObject()) target->SetObject();
  for (auto it = patch.MemberBegin(); it != patch.MemberEnd(); ++it) {
    auto existing = target->FindMember(it->name);
    if (it->value.IsNull()) {
      if (existing != target->MemberEnd()) target->EraseMember(existing);
      continue;
    }
    if (existing == target->MemberEnd()) {
      JsonValue name(it->name, allocator);
      JsonValue value(rapidjson::kNullType);
      ApplyMergePatch(&value, it->value, allocator);
      target->AddMember(name, value, allocator);
    } else {
      ApplyMergePatch(&existing->value, it->value, allocator);
    }
  }
}

namespace {

const JsonValue* EvalSteps(const std::vector<PathStep>& steps, size_t from, const JsonValue& at) {
  const JsonValue* current = &at;
  for (size_t i = from; i < steps.size(); ++i) {
    const PathStep& step = steps[i];
    switch (step.kind) {
      case PathStep::Kind::kField: {
        if (!current->IsObject()) return nullptr;
        auto it = current->FindMember(
            JsonValue(rapidjson::StringRef(step.field.data(), step.field.size())));
        if (it == current->MemberEnd()) return nullptr;
        current = &it->value;
        break;
      }
      case PathStep::Kind::kIndex:
        if (!current->IsArray() || step.index >= current->Size()) return nullptr;
        current = &(*current)[static_cast<rapidjson::SizeType>(step.index)];
        break;
      case PathStep::Kind::kFirstWith:
        if (!current->IsArray()) return nullptr;
        for (const JsonValue& element : current->GetArray()) {
          const JsonValue* found = EvalSteps(steps, i + 1, element);
          if (found != nullptr) return found;
        }
        return nullptr;
    }
  }
  return current;
}

}  // namespace

const JsonValue* EvalPath(const Path& path, const std::string& entity_id, const JsonValue& data,
                          JsonValue* scratch, JsonAllocator& scratch_allocator) {
  if (path.steps.size() == 1 && path.steps[0].kind == PathStep::Kind::kField &&
      path.steps[0].field == "id") {
    scratch->SetString(entity_id.data(), static_cast<rapidjson::SizeType>(entity_id.size()),
                       scratch_allocator);
    return scratch;
  }
  return EvalSteps(path.steps, 0, data);
}

std::string RenderTemplate(const Template& tmpl, const std::string& entity_id,
                           const JsonValue& data) {
  std::string out;
  JsonDocument scratch_doc;
  for (const Template::Part& part : tmpl.parts) {
    if (!part.is_path) {
      out += part.literal;
      continue;
    }
    JsonValue scratch;
    const JsonValue* value =
        EvalPath(part.path, entity_id, data, &scratch, scratch_doc.GetAllocator());
    if (value == nullptr || value->IsNull()) continue;
    if (value->IsString()) {
      out.append(value->GetString(), value->GetStringLength());
    } else {
      out += ToJson(*value);
    }
  }
  return out;
}

std::string OrderKey(const JsonValue* value, bool descending) {
  if (value == nullptr || value->IsNull()) return std::string(1, '\x02');
  std::string body;
  if (value->IsNumber()) {
    body.push_back('\x00');
    double d = value->GetDouble();
    if (d == 0) d = 0;  // -0 == 0
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof(bits));
    // Order-preserving: flip the sign bit of positives, every bit of negatives.
    bits = (bits & (1ull << 63)) ? ~bits : bits | (1ull << 63);
    for (int shift = 56; shift >= 0; shift -= 8) body.push_back(static_cast<char>(bits >> shift));
  } else if (value->IsString()) {
    body.push_back('\x01');
    body.append(value->GetString(), value->GetStringLength());
    body.push_back('\x00');  // terminator: "a" < "ab" both ways (strings hold no NUL)
  } else if (value->IsBool()) {
    body.push_back('\x02');
    body.push_back(value->GetBool() ? '\x01' : '\x00');
  } else if (value->IsArray()) {
    body.push_back('\x03');
  } else {
    body.push_back('\x04');
  }
  if (descending) {
    for (char& c : body) c = static_cast<char>(~static_cast<unsigned char>(c));
  }
  return std::string(1, '\x01') + body;
}

std::optional<std::string> StringOfOrderKey(const std::string& key) {
  if (key.size() < 3 || key[0] != '\x01' || key[1] != '\x01' || key.back() != '\0') {
    return std::nullopt;
  }
  std::string text = key.substr(2, key.size() - 3);
  if (text.find('\0') != std::string::npos) return std::nullopt;
  return text;
}

}  // namespace denormd

namespace denormd {

namespace {

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The index just past the string that starts (with its quote) at `i`.
size_t SkipString(const std::string& text, size_t i) {
  for (++i; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == '"') {
      return i + 1;
    }
  }
  return std::string::npos;
}

// The index just past the value that starts at `i`: strings and nested
// containers skipped whole, scalars up to the next delimiter.
size_t SkipValue(const std::string& text, size_t i) {
  if (i >= text.size()) return std::string::npos;
  if (text[i] == '"') return SkipString(text, i);
  if (text[i] != '{' && text[i] != '[') {
    while (i < text.size() && text[i] != ',' && text[i] != '}' && text[i] != ']' &&
           !IsJsonSpace(text[i])) {
      ++i;
    }
    return i;
  }
  int depth = 0;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      i = SkipString(text, i);
      if (i == std::string::npos) return i;
      --i;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string::npos;
}

size_t SkipSpace(const std::string& text, size_t i) {
  while (i < text.size() && IsJsonSpace(text[i])) ++i;
  return i;
}

}  // namespace

bool NeedsJsonEscaping(const std::string& text) {
  for (char c : text) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) return true;
  }
  return false;
}

bool SplitArrayField(const std::string& object, const std::string& field,
                     std::vector<std::string>* items) {
  if (NeedsJsonEscaping(field)) return false;
  size_t i = SkipSpace(object, 0);
  if (i >= object.size() || object[i] != '{') return false;
  i = SkipSpace(object, i + 1);
  while (i < object.size() && object[i] == '"') {
    size_t key_end = SkipString(object, i);
    if (key_end == std::string::npos) return false;
    bool match = object.compare(i + 1, key_end - i - 2, field) == 0;
    i = SkipSpace(object, key_end);
    if (i >= object.size() || object[i] != ':') return false;
    i = SkipSpace(object, i + 1);
    if (match) {
      if (i >= object.size() || object[i] != '[') return false;
      items->clear();
      i = SkipSpace(object, i + 1);
      if (i < object.size() && object[i] == ']') return true;
      while (i < object.size()) {
        size_t end = SkipValue(object, i);
        if (end == std::string::npos) return false;
        items->push_back(object.substr(i, end - i));
        i = SkipSpace(object, end);
        if (i < object.size() && object[i] == ']') return true;
        if (i >= object.size() || object[i] != ',') return false;
        i = SkipSpace(object, i + 1);
      }
      return false;
    }
    i = SkipValue(object, i);
    if (i == std::string::npos) return false;
    i = SkipSpace(object, i);
    if (i < object.size() && object[i] == ',') i = SkipSpace(object, i + 1);
  }
  return false;
}

}  // namespace denormd
