#include "projections/selection.h"

namespace denormd {

bool EvalScalar(const Expression& expression, const std::string& id, const JsonValue& data,
                JsonValue* out, JsonAllocator& allocator) {
  switch (expression.kind) {
    case Expression::Kind::kPath: {
      JsonValue scratch;
      const JsonValue* value = EvalPath(expression.path, id, data, &scratch, allocator);
      if (value == nullptr) return false;
      out->CopyFrom(*value, allocator);
      return true;
    }
    case Expression::Kind::kTemplate: {
      std::string text = RenderTemplate(expression.template_, id, data);
      out->SetString(text.data(), static_cast<rapidjson::SizeType>(text.size()), allocator);
      return true;
    }
    case Expression::Kind::kValue: {
      JsonDocument literal;
      if (!ParseJson(expression.value_json, &literal).ok()) return false;
      out->CopyFrom(literal, allocator);
      return true;
    }
    case Expression::Kind::kDerived:
      return false;  // not scalar; config validation keeps these out of select maps
  }
  return false;
}

void AddMember(JsonValue* object, const std::string& name, JsonValue& value,
               JsonAllocator& allocator) {
  JsonValue key(name.data(), static_cast<rapidjson::SizeType>(name.size()), allocator);
  object->AddMember(key, value, allocator);
}

void ApplySelection(const Selection& selection, const std::string& id, const JsonValue& data,
                    JsonValue* out, JsonAllocator& allocator) {
  out->SetObject();
  switch (selection.kind) {
    case Selection::Kind::kWhole: {
      for (auto it = data.MemberBegin(); it != data.MemberEnd(); ++it) {
        if (std::string(it->name.GetString(), it->name.GetStringLength()) == "id") continue;
        JsonValue value(it->value, allocator);
        JsonValue name(it->name, allocator);
        out->AddMember(name, value, allocator);
      }
      JsonValue id_value(id.data(), static_cast<rapidjson::SizeType>(id.size()), allocator);
      AddMember(out, "id", id_value, allocator);
      return;
    }
    case Selection::Kind::kList:
      for (const std::string& field : selection.fields) {
        JsonValue value;
        if (field == "id") {
          value.SetString(id.data(), static_cast<rapidjson::SizeType>(id.size()), allocator);
        } else {
          auto it = data.FindMember(JsonValue(rapidjson::StringRef(field.data(), field.size())));
          if (it == data.MemberEnd()) continue;
          value.CopyFrom(it->value, allocator);
        }
        AddMember(out, field, value, allocator);
      }
      return;
    case Selection::Kind::kMap:
      for (const auto& entry : selection.map) {
        JsonValue value;
        if (EvalScalar(entry.second, id, data, &value, allocator)) {
          AddMember(out, entry.first, value, allocator);
        }
      }
      return;
  }
}

bool SelectionChanged(const Selection& selection, const EntityState& before,
                      const EntityState& after) {
  const bool live_before = IsLive(before), live_after = IsLive(after);
  if (live_before != live_after) return true;
  if (!live_before) return false;
  JsonDocument a, b;
  ApplySelection(selection, before->key.id, *before->data, &a, a.GetAllocator());
  ApplySelection(selection, after->key.id, *after->data, &b, b.GetAllocator());
  return !JsonEquals(a, b);
}

}  // namespace denormd
