#include "formats/native_format.h"

#include <string>

namespace denormd {

namespace {

Status RequireString(const JsonValue& event, const char* field, std::string* out) {
  auto it = event.FindMember(field);
  if (it == event.MemberEnd()) return Status::InvalidInput(std::string("missing field \"") + field + "\"");
  if (!it->value.IsString()) {
    return Status::InvalidInput(std::string("field \"") + field + "\" must be a string");
  }
  out->assign(it->value.GetString(), it->value.GetStringLength());
  return Status::Ok();
}

// PostgreSQL text and jsonb cannot hold U+0000; such an event could never be
// stored, so it is rejected here rather than failing its whole batch later.
bool ContainsNul(const JsonValue& value) {
  if (value.IsString()) {
    return std::char_traits<char>::find(value.GetString(), value.GetStringLength(), '\0') !=
           nullptr;
  }
  if (value.IsArray()) {
    for (const JsonValue& element : value.GetArray()) {
      if (ContainsNul(element)) return true;
    }
  }
  if (value.IsObject()) {
    for (auto it = value.MemberBegin(); it != value.MemberEnd(); ++it) {
      if (ContainsNul(it->name) || ContainsNul(it->value)) return true;
    }
  }
  return false;
}

}  // namespace

Status DecodeNativeEvent(const Config& config, const std::string& bytes, EntityEvent* out) {
  auto doc = NewEntityJson();
  DENORMD_RETURN_IF_ERROR(ParseJson(bytes, doc.get()));
  if (!doc->IsObject()) return Status::InvalidInput("an event must be a JSON object");
  if (ContainsNul(*doc)) {
    return Status::InvalidInput("the event contains a U+0000 character, which PostgreSQL cannot store");
  }

  EntityEvent event;
  DENORMD_RETURN_IF_ERROR(RequireString(*doc, "type", &event.key.type));
  if (!config.HasEntity(event.key.type)) {
    return Status::InvalidInput("unknown entity type \"" + event.key.type + "\"");
  }
  DENORMD_RETURN_IF_ERROR(RequireString(*doc, "id", &event.key.id));
  if (event.key.id.empty()) return Status::InvalidInput("field \"id\" must not be empty");

  std::string op;
  DENORMD_RETURN_IF_ERROR(RequireString(*doc, "op", &op));
  if (op == "upsert") {
    event.op = EventOp::kUpsert;
  } else if (op == "patch") {
    event.op = EventOp::kPatch;
  } else if (op == "delete") {
    event.op = EventOp::kDelete;
  } else {
    return Status::InvalidInput("unknown op \"" + op + "\" (expected upsert, patch or delete)");
  }

  auto version = doc->FindMember("version");
  if (version != doc->MemberEnd() && !version->value.IsNull()) {
    if (!version->value.IsUint64()) {
      return Status::InvalidInput("field \"version\" must be an unsigned 64-bit integer");
    }
    event.version = version->value.GetUint64();
  }

  auto data = doc->FindMember("data");
  if (event.op != EventOp::kDelete) {
    if (data == doc->MemberEnd() || data->value.IsNull()) {
      return Status::InvalidInput("op \"" + op + "\" needs a \"data\" object");
    }
    if (!data->value.IsObject()) return Status::InvalidInput("field \"data\" must be an object");
    auto owned = NewEntityJson();
    owned->CopyFrom(data->value, owned->GetAllocator());
    event.data = std::move(owned);
  }
  *out = std::move(event);
  return Status::Ok();
}

Status NativeDecoder::Decode(const RawRecord& record, std::vector<EntityEvent>* events,
                             bool* skipped) const {
  *skipped = false;
  if (!record.value) return Status::InvalidInput("the message has no value (a tombstone)");
  EntityEvent event;
  DENORMD_RETURN_IF_ERROR(DecodeNativeEvent(config_, *record.value, &event));
  events->push_back(std::move(event));
  return Status::Ok();
}

}  // namespace denormd
