#include "formats/native_format.h"

#include <memory>
#include <string>
#include <vector>

#include "formats/input_format.h"
#include "formats/json_input.h"

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

}  // namespace

Status DecodeNativeEvent(const Config& config, const std::string& bytes, EntityEvent* out) {
  auto doc = NewEntityJson();
  DENORMD_RETURN_IF_ERROR(ParseInputJson(bytes, doc.get()));
  if (!doc->IsObject()) return Status::InvalidInput("an event must be a JSON object");

  EntityEvent event;
  DENORMD_RETURN_IF_ERROR(RequireString(*doc, "type", &event.key.type));
  if (!config.HasEntity(event.key.type)) {
    return Status::InvalidInput("unknown entity type \"" + event.key.type + "\"");
  }
  DENORMD_RETURN_IF_ERROR(RequireString(*doc, "id", &event.key.id));
  if (event.key.id.empty()) return Status::InvalidInput("field \"id\" must not be empty");
  if (event.key.id.size() > kMaxIdBytes) {
    return Status::InvalidInput("field \"id\" is " + std::to_string(event.key.id.size()) +
                                " bytes long; an id is at most " + std::to_string(kMaxIdBytes));
  }

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

namespace {

// The native format has no keys of its own: a topic's settings are empty.
class NoSettings : public InputSettings {
 public:
  std::string Normalized() const override { return ""; }
};

class Format : public InputFormat {
 public:
  const std::string& name() const override { return name_; }
  const std::vector<std::string>& keys() const override { return keys_; }
  std::shared_ptr<const InputSettings> Parse(TopicReader& /*reader*/) const override {
    static const auto settings = std::make_shared<const NoSettings>();
    return settings;
  }
  std::unique_ptr<Decoder> MakeDecoder(const Config& config,
                                       const TopicInput& /*input*/) const override {
    return std::make_unique<NativeDecoder>(config);
  }

 private:
  const std::string name_ = "native";
  const std::vector<std::string> keys_;
};

}  // namespace

const InputFormat& NativeFormat() {
  static const Format format;
  return format;
}

}  // namespace denormd
