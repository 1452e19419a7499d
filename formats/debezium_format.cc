#include "formats/debezium_format.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "formats/input_format.h"
#include "formats/json_input.h"

namespace denormd {

namespace {

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

const char* TypeName(const JsonValue& value) {
  if (value.IsNull()) return "null";
  if (value.IsBool()) return "a boolean";
  if (value.IsNumber()) return "a number";
  if (value.IsString()) return "a string";
  if (value.IsArray()) return "an array";
  return "an object";
}

// The payload of JsonConverter's {"schema": ..., "payload": ...} wrapper, or
// the value itself when it is not wrapped.
const JsonValue& Unwrap(const JsonValue& value) {
  if (value.IsObject() && value.MemberCount() == 2 && value.HasMember("schema") &&
      value.HasMember("payload")) {
    return value["payload"];
  }
  return value;
}

const JsonValue* Member(const JsonValue& object, const char* name) {
  if (!object.IsObject()) return nullptr;
  auto it = object.FindMember(name);
  return it == object.MemberEnd() ? nullptr : &it->value;
}

// The text a key column's value contributes to an id.
Status KeyText(const JsonValue& value, const std::string& column, std::string* out) {
  if (value.IsString()) {
    out->assign(value.GetString(), value.GetStringLength());
  } else if (value.IsUint64()) {
    *out = std::to_string(value.GetUint64());
  } else if (value.IsInt64()) {
    *out = std::to_string(value.GetInt64());
  } else if (value.IsBool()) {
    *out = value.GetBool() ? "true" : "false";
  } else {
    return Status::InvalidInput("key column " + Quote(column) +
                                " must be a string, an integer or a boolean to make an id, found " +
                                TypeName(value));
  }
  return Status::Ok();
}

// The table the record belongs to, from its topic: "app.public.books" -> "books".
std::string TableOfTopic(const std::string& topic) {
  const size_t dot = topic.rfind('.');
  return dot == std::string::npos ? topic : topic.substr(dot + 1);
}

// "public.comments" from the envelope's source block, for messages.
std::string SourceTable(const JsonValue& source, const std::string& topic) {
  const JsonValue* schema = Member(source, "schema");
  const JsonValue* table = Member(source, "table");
  if (schema && table && schema->IsString() && table->IsString()) {
    return std::string(schema->GetString()) + "." + table->GetString();
  }
  return TableOfTopic(topic);
}

// What the connector writes for a TOASTed column that an UPDATE left
// unchanged (with the table's default replica identity): its
// `unavailable.value.placeholder`, left at its default. A text or jsonb
// column holds the string; a bytea column its bytes, which the JSON
// converter writes in base64; an array column an array of the string.
constexpr const char kUnavailable[] = "__debezium_unavailable_value";
constexpr const char kUnavailableBase64[] = "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==";

bool IsUnavailableValue(const JsonValue& value) {
  if (value.IsString()) {
    const std::string text(value.GetString(), value.GetStringLength());
    return text == kUnavailable || text == kUnavailableBase64;
  }
  if (!value.IsArray() || value.Empty()) return false;
  for (const JsonValue& element : value.GetArray()) {
    if (!element.IsString() || element.GetString() != std::string(kUnavailable)) return false;
  }
  return true;
}

}  // namespace

std::string JoinIdParts(const std::vector<std::string>& parts) {
  if (parts.size() == 1) return parts[0];
  std::string id;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) id.push_back(':');
    for (const char c : parts[i]) {
      if (c == '\\' || c == ':') id.push_back('\\');
      id.push_back(c);
    }
  }
  return id;
}

Status DebeziumDecoder::Decode(const RawRecord& record, std::vector<EntityEvent>* events,
                               bool* skipped) const {
  *skipped = false;
  if (!record.value) {  // a tombstone: log compaction's marker after a delete
    *skipped = true;
    return Status::Ok();
  }
  auto doc = NewEntityJson();
  DENORMD_RETURN_IF_ERROR(ParseInputJson(*record.value, doc.get()));
  const JsonValue& envelope = Unwrap(*doc);
  if (envelope.IsNull()) {  // a wrapped null payload: a tombstone as well
    *skipped = true;
    return Status::Ok();
  }
  if (!envelope.IsObject()) {
    return Status::InvalidInput(std::string("a Debezium change event must be a JSON object, found ") +
                                TypeName(envelope));
  }

  const JsonValue* op_value = Member(envelope, "op");
  if (!op_value) return Status::InvalidInput("the Debezium envelope has no \"op\"");
  if (!op_value->IsString()) {
    return Status::InvalidInput(std::string("the envelope's \"op\" must be a string, found ") +
                                TypeName(*op_value));
  }
  const std::string op(op_value->GetString(), op_value->GetStringLength());
  const JsonValue* source = Member(envelope, "source");
  if (!source || !source->IsObject()) {
    return Status::InvalidInput("the envelope's \"source\" must be an object, found " +
                                std::string(source ? TypeName(*source) : "nothing"));
  }
  const JsonValue* lsn = Member(*source, "lsn");
  if (!lsn || !lsn->IsUint64()) {
    return Status::InvalidInput(
        std::string("\"source.lsn\" must be an unsigned 64-bit integer (the PostgreSQL "
                    "connector's log position, denormd's version), found ") +
        (lsn ? TypeName(*lsn) : "nothing") + " (only the PostgreSQL connector is supported)");
  }
  const std::string table = SourceTable(*source, record.topic);
  const std::string entity =
      settings_.entity.empty() ? TableOfTopic(record.topic) : settings_.entity;
  if (op == "t") {
    const std::string at = std::to_string(lsn->GetUint64());
    return Status::InvalidInput(
        "TRUNCATE of " + table + " at lsn " + at +
        ": denormd does not delete truncated rows, so the stored " + entity +
        " entities (and the documents built on them) still hold the rows that existed before "
        "it. To resync, replay a native delete at version " + at + " for every stored " +
        entity + " entity: those changed after the truncate have greater versions and stay "
        "(docs/configuration.md, \"Input formats, Debezium\")");
  }
  EventOp event_op;
  const char* row_field;
  if (op == "c" || op == "r" || op == "u") {
    event_op = EventOp::kUpsert;
    row_field = "after";
  } else if (op == "d") {
    event_op = EventOp::kDelete;
    row_field = "before";
  } else {
    return Status::InvalidInput("unknown op " + Quote(op.substr(0, 20)) +
                                " in the Debezium envelope (expected c, r, u, d or t)");
  }
  const JsonValue* row = Member(envelope, row_field);
  if (event_op == EventOp::kUpsert && (!row || !row->IsObject())) {
    return Status::InvalidInput("op " + Quote(op) + " needs an object in \"after\", found " +
                                (row ? TypeName(*row) : "nothing"));
  }
  if (row && !row->IsObject()) row = nullptr;  // a delete may come without `before`

  EntityEvent event;
  event.op = event_op;
  event.version = lsn->GetUint64();
  event.key.type = entity;
  if (!config_.HasEntity(event.key.type)) {
    return Status::InvalidInput("topic " + Quote(record.topic) + " maps to the entity type " +
                                Quote(event.key.type) + ", which is not in entities");
  }

  // The id, from the record key (or the row for columns the key lacks).
  auto key_doc = NewEntityJson();
  const JsonValue* key = nullptr;
  if (record.key && !record.key->empty()) {
    Status parsed = ParseInputJson(*record.key, key_doc.get());
    if (!parsed.ok()) return Status::InvalidInput("the record key: " + parsed.message());
    key = &Unwrap(*key_doc);
    if (key->IsNull()) {
      key = nullptr;
    } else if (!key->IsObject()) {
      return Status::InvalidInput(std::string("the record key must be a JSON object of key "
                                              "columns, found ") +
                                  TypeName(*key));
    }
  }
  std::vector<std::string> parts;
  if (settings_.id_columns.empty()) {
    if (!key || key->MemberCount() == 0) {
      return Status::InvalidInput(
          "the record has no key columns to make an id from (a table without a primary key: "
          "name its id columns with id_columns)");
    }
    for (auto it = key->MemberBegin(); it != key->MemberEnd(); ++it) {
      const std::string column(it->name.GetString(), it->name.GetStringLength());
      std::string text;
      DENORMD_RETURN_IF_ERROR(KeyText(it->value, column, &text));
      parts.push_back(std::move(text));
    }
  } else {
    for (const std::string& column : settings_.id_columns) {
      const JsonValue* value = key ? Member(*key, column.c_str()) : nullptr;
      if (!value && row) value = Member(*row, column.c_str());
      if (!value) {
        return Status::InvalidInput("id column " + Quote(column) + " is neither in the record key nor in \"" +
                                    row_field + "\"");
      }
      std::string text;
      DENORMD_RETURN_IF_ERROR(KeyText(*value, column, &text));
      parts.push_back(std::move(text));
    }
  }
  event.key.id = JoinIdParts(parts);
  if (event.key.id.empty()) return Status::InvalidInput("the id made of the key columns is empty");
  if (event.key.id.size() > kMaxIdBytes) {
    return Status::InvalidInput("the id made of the key columns is " +
                                std::to_string(event.key.id.size()) + " bytes long; an id is at most " +
                                std::to_string(kMaxIdBytes));
  }

  if (event_op == EventOp::kUpsert) {
    auto data = NewEntityJson();
    data->CopyFrom(*row, data->GetAllocator());
    // Columns the connector did not send keep their stored values
    // (EntityEvent::unchanged; the BatchApplier merges them).
    for (auto it = data->MemberBegin(); it != data->MemberEnd(); ++it) {
      if (IsUnavailableValue(it->value)) {
        event.unchanged.emplace_back(it->name.GetString(), it->name.GetStringLength());
      }
    }
    for (const std::string& column : settings_.json_columns) {
      auto it = data->FindMember(column.c_str());
      if (it == data->MemberEnd() || it->value.IsNull()) continue;
      if (std::find(event.unchanged.begin(), event.unchanged.end(), column) !=
          event.unchanged.end()) {
        continue;
      }
      if (!it->value.IsString()) {
        return Status::InvalidInput("column " + Quote(column) +
                                    " (json_columns) must hold a string of JSON, found " +
                                    TypeName(it->value));
      }
      auto parsed = NewEntityJson();
      Status status = ParseInputJson(std::string(it->value.GetString(), it->value.GetStringLength()),
                                     parsed.get());
      if (!status.ok()) {
        return Status::InvalidInput("column " + Quote(column) +
                                    " (json_columns) does not hold JSON: " + status.message());
      }
      it->value.CopyFrom(*parsed, data->GetAllocator());
    }
    event.data = std::move(data);
  }
  events->push_back(std::move(event));
  return Status::Ok();
}

std::string DebeziumSettings::Normalized() const {
  const auto list = [](const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
    return out;
  };
  return "entity " + entity + " id_columns " + list(id_columns) + " json_columns " +
         list(json_columns);
}

const DebeziumSettings& DebeziumSettingsOf(const TopicInput& input) {
  static const DebeziumSettings defaults;
  if (input.settings == nullptr) return defaults;
  return static_cast<const DebeziumSettings&>(*input.settings);
}

namespace {

class Format : public InputFormat {
 public:
  const std::string& name() const override { return name_; }
  const std::vector<std::string>& keys() const override { return keys_; }

  std::shared_ptr<const InputSettings> Parse(TopicReader& reader) const override {
    auto settings = std::make_shared<DebeziumSettings>();
    bool ok = true;
    if (reader.Has("entity")) {
      ok = reader.ReadEntityType("entity", &settings->entity) && ok;
    } else if (!reader.is_pattern() && reader.entity_types_known()) {
      const std::string table = TableOfTopic(reader.topic());
      if (!reader.IsEntityType(table)) {
        reader.Error("topic", "topic " + Quote(reader.topic()) + " maps to the entity type " +
                                  Quote(table) +
                                  " (its table name), which is not in entities; add it "
                                  "there or name the type with \"entity\"");
        ok = false;
      }
    }
    if (reader.Has("id_columns")) {
      ok = reader.ReadDistinctList("id_columns", "column", &settings->id_columns) && ok;
    }
    if (reader.Has("json_columns")) {
      ok = reader.ReadDistinctList("json_columns", "column", &settings->json_columns) && ok;
    }
    return ok ? settings : nullptr;
  }

  std::unique_ptr<Decoder> MakeDecoder(const Config& config,
                                       const TopicInput& input) const override {
    return std::make_unique<DebeziumDecoder>(config, DebeziumSettingsOf(input));
  }

  // Kafka Connect creates a table's topic when the table gets its first row.
  bool TopicsAppearLater() const override { return true; }

 private:
  const std::string name_ = "debezium";
  const std::vector<std::string> keys_ = {"entity", "id_columns", "json_columns"};
};

}  // namespace

const InputFormat& DebeziumFormat() {
  static const Format format;
  return format;
}

}  // namespace denormd
