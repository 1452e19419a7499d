#include "projections/document_set.h"

#include <algorithm>
#include <memory>
#include <set>
#include <tuple>

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

namespace denormd {

namespace {

// Values longer than this (as compact JSON) are cut in difference lines.
constexpr size_t kShownBytes = 120;

std::string Shown(const JsonValue& value) {
  std::string text = ToJson(value);
  if (text.size() <= kShownBytes) return text;
  size_t cut = kShownBytes;  // at a UTF-8 character boundary
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

std::string Shown(const std::string& json) {
  JsonDocument doc;
  if (!ParseJson(json, &doc).ok()) return json.substr(0, kShownBytes);
  return Shown(static_cast<const JsonValue&>(doc));
}

std::string NameOf(const JsonValue& name) {
  return std::string(name.GetString(), name.GetStringLength());
}

// ".name" for a plain name, "[\"any key\"]" otherwise.
std::string KeyStep(const std::string& name) {
  bool plain = !name.empty();
  for (size_t i = 0; plain && i < name.size(); ++i) {
    const char c = name[i];
    plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
            (i > 0 && c >= '0' && c <= '9');
  }
  if (plain) return "." + name;
  JsonValue quoted(name.data(), static_cast<rapidjson::SizeType>(name.size()));
  return "[" + ToJson(quoted) + "]";
}

std::string ShownPath(const std::string& path) {
  if (path.empty()) return ".";
  return path[0] == '[' ? "." + path : path;
}

// Sets *out and returns true when `a` and `e` differ at or below `path`.
bool FindDifference(const JsonValue& a, const JsonValue& e, const std::string& path,
                    std::string* out) {
  if (JsonEquals(a, e)) return false;
  if (a.IsObject() && e.IsObject()) {
    std::set<std::string> names;
    for (auto it = a.MemberBegin(); it != a.MemberEnd(); ++it) names.insert(NameOf(it->name));
    for (auto it = e.MemberBegin(); it != e.MemberEnd(); ++it) names.insert(NameOf(it->name));
    for (const std::string& name : names) {
      const JsonValue key(name.data(), static_cast<rapidjson::SizeType>(name.size()));
      const auto in_a = a.FindMember(key), in_e = e.FindMember(key);
      const std::string step = path + KeyStep(name);
      if (in_a == a.MemberEnd()) {
        *out = ShownPath(step) + ": missing != " + Shown(in_e->value);
        return true;
      }
      if (in_e == e.MemberEnd()) {
        *out = ShownPath(step) + ": " + Shown(in_a->value) + " != missing";
        return true;
      }
      if (FindDifference(in_a->value, in_e->value, step, out)) return true;
    }
    // Equal member by member, yet unequal: a repeated key. Shown whole below.
  } else if (a.IsArray() && e.IsArray()) {
    for (rapidjson::SizeType i = 0; i < std::max(a.Size(), e.Size()); ++i) {
      const std::string step = path + "[" + std::to_string(i) + "]";
      if (i >= a.Size()) {
        *out = ShownPath(step) + ": missing != " + Shown(e[i]);
        return true;
      }
      if (i >= e.Size()) {
        *out = ShownPath(step) + ": " + Shown(a[i]) + " != missing";
        return true;
      }
      if (FindDifference(a[i], e[i], step, out)) return true;
    }
  }
  *out = ShownPath(path) + ": " + Shown(a) + " != " + Shown(e);
  return true;
}

using PrettyWriter = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

void WriteSorted(const JsonValue& value, PrettyWriter* w) {
  if (value.IsObject()) {
    std::vector<const JsonValue::Member*> members;
    for (auto it = value.MemberBegin(); it != value.MemberEnd(); ++it) members.push_back(&*it);
    std::sort(members.begin(), members.end(),
              [](const JsonValue::Member* a, const JsonValue::Member* b) {
                return NameOf(a->name) < NameOf(b->name);
              });
    w->StartObject();
    for (const JsonValue::Member* member : members) {
      w->Key(member->name.GetString(), member->name.GetStringLength());
      WriteSorted(member->value, w);
    }
    w->EndObject();
  } else if (value.IsArray()) {
    w->StartArray();
    for (const JsonValue& element : value.GetArray()) WriteSorted(element, w);
    w->EndArray();
  } else {
    value.Accept(*w);
  }
}

void WriteString(const std::string& text, PrettyWriter* w) {
  w->String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
}

void WriteShape(const BucketShape& shape, PrettyWriter* w) {
  w->StartObject();
  w->Key("by");
  WriteString(shape.by, w);
  w->Key("field");
  WriteString(shape.field, w);
  w->Key("layout");
  w->String(shape.stable ? "stable" : "packed");
  w->Key("size");
  w->Uint64(shape.size);
  w->EndObject();
}

std::string ShapeJson(const BucketShape& shape) {
  return std::string("{\"by\":") + ToJson(JsonValue(shape.by.data(), static_cast<rapidjson::SizeType>(shape.by.size()))) +
         ",\"field\":" +
         ToJson(JsonValue(shape.field.data(), static_cast<rapidjson::SizeType>(shape.field.size()))) +
         ",\"layout\":\"" + (shape.stable ? "stable" : "packed") +
         "\",\"size\":" + std::to_string(shape.size) + "}";
}

Status ParseShape(const std::string& where, const JsonValue& value, BucketShape* out) {
  const std::string form =
      where + ": a bucket collection is {\"by\": FIELD, \"field\": FIELD, \"layout\": "
              "\"stable\" or \"packed\", \"size\": N}";
  if (!value.IsObject() || value.MemberCount() != 4 || !value.HasMember("by") ||
      !value["by"].IsString() || !value.HasMember("field") || !value["field"].IsString() ||
      !value.HasMember("layout") || !value["layout"].IsString() || !value.HasMember("size") ||
      !value["size"].IsUint64() || value["size"].GetUint64() == 0) {
    return Status::InvalidInput(form);
  }
  const std::string layout = NameOf(value["layout"]);
  if (layout != "stable" && layout != "packed") return Status::InvalidInput(form);
  out->by = NameOf(value["by"]);
  out->field = NameOf(value["field"]);
  out->size = value["size"].GetUint64();
  out->stable = layout == "stable";
  return Status::Ok();
}

void DiffDocuments(const std::string& collection, const std::map<std::string, std::string>& actual,
                   const std::map<std::string, std::string>& expected,
                   std::vector<std::string>* lines) {
  auto a = actual.begin();
  auto e = expected.begin();
  while (a != actual.end() || e != expected.end()) {
    if (e == expected.end() || (a != actual.end() && a->first < e->first)) {
      lines->push_back(collection + "/" + a->first + ": unexpected " + Shown(a->second));
      ++a;
    } else if (a == actual.end() || e->first < a->first) {
      lines->push_back(collection + "/" + e->first + ": missing, expected " + Shown(e->second));
      ++e;
    } else {
      JsonDocument have, want;
      std::string difference;
      if (!ParseJson(a->second, &have).ok() || !ParseJson(e->second, &want).ok()) {
        if (a->second != e->second) difference = "not valid JSON";
      } else {
        FindDifference(have, want, "", &difference);
      }
      if (!difference.empty()) lines->push_back(collection + "/" + a->first + ": " + difference);
      ++a;
      ++e;
    }
  }
}

// The groups of a `stable` bucket collection: each group's items in
// ascending seq, as one JSON array (allocated in `holder`). Appends a line per
// document that is not a bucket and per broken invariant, each ending in
// `suffix`.
std::map<std::string, JsonValue> StableGroups(const std::string& collection,
                                              const BucketShape& shape,
                                              const std::map<std::string, std::string>& docs,
                                              const std::string& suffix, JsonDocument* holder,
                                              std::vector<std::string>* lines) {
  struct Bucket {
    int64_t seq;
    std::string id;
    std::unique_ptr<JsonDocument> doc;
  };
  std::map<std::string, std::vector<Bucket>> by_group;
  const JsonValue by(shape.by.data(), static_cast<rapidjson::SizeType>(shape.by.size()));
  const JsonValue field(shape.field.data(), static_cast<rapidjson::SizeType>(shape.field.size()));
  for (const auto& entry : docs) {
    const std::string& id = entry.first;
    auto doc = std::make_unique<JsonDocument>();
    if (!ParseJson(entry.second, doc.get()).ok() || !doc->IsObject()) {
      lines->push_back(collection + "/" + id + ": not a JSON object" + suffix);
      continue;
    }
    const auto group = doc->FindMember(by), seq = doc->FindMember("seq"),
               items = doc->FindMember(field);
    if (group == doc->MemberEnd() || !group->value.IsString() || seq == doc->MemberEnd() ||
        !seq->value.IsInt64() || items == doc->MemberEnd() || !items->value.IsArray()) {
      lines->push_back(collection + "/" + id + ": not a bucket document (needs a string \"" +
                       shape.by + "\", an integer \"seq\" and a \"" + shape.field + "\" array)" +
                       suffix);
      continue;
    }
    const std::string name = NameOf(group->value);
    const std::string number = id.size() > name.size() + 1 && id.compare(0, name.size() + 1, name + ":") == 0
                                   ? id.substr(name.size() + 1)
                                   : std::string();
    if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) {
      lines->push_back(collection + "/" + id + ": the id of a bucket of group " + name +
                       " is " + name + ":<n>" + suffix);
    }
    const int64_t seq_value = seq->value.GetInt64();
    by_group[name].push_back({seq_value, id, std::move(doc)});
  }
  const uint64_t min_fill = (shape.size + 1) / 2;
  std::map<std::string, JsonValue> out;
  for (auto& group : by_group) {
    std::vector<Bucket>& buckets = group.second;
    std::sort(buckets.begin(), buckets.end(), [](const Bucket& a, const Bucket& b) {
      return std::tie(a.seq, a.id) < std::tie(b.seq, b.id);
    });
    JsonValue& items = out[group.first];
    items.SetArray();
    for (size_t i = 0; i < buckets.size(); ++i) {
      const Bucket& bucket = buckets[i];
      const JsonValue& own = (*bucket.doc)[field];
      const uint64_t n = own.Size();
      const std::string where = collection + "/" + bucket.id + ": ";
      if (n == 0) lines->push_back(where + "an empty bucket" + suffix);
      if (n > shape.size) {
        lines->push_back(where + std::to_string(n) + " items, more than size " +
                         std::to_string(shape.size) + suffix);
      }
      if (n > 0 && n < min_fill && i + 1 < buckets.size()) {
        lines->push_back(where + std::to_string(n) + (n == 1 ? " item" : " items") +
                         ", fewer than " + std::to_string(min_fill) +
                         " though not its group's last (by seq)" + suffix);
      }
      if (i > 0 && buckets[i - 1].seq == bucket.seq) {
        lines->push_back(collection + " group " + group.first + ": buckets " +
                         buckets[i - 1].id + " and " + bucket.id + " have the same seq " +
                         std::to_string(bucket.seq) + suffix);
      }
      for (const JsonValue& item : own.GetArray()) {
        items.PushBack(JsonValue(item, holder->GetAllocator()), holder->GetAllocator());
      }
    }
  }
  return out;
}

void DiffStableBuckets(const std::string& collection, const BucketShape& shape,
                       const std::map<std::string, std::string>& actual,
                       const std::map<std::string, std::string>& expected,
                       std::vector<std::string>* lines) {
  JsonDocument holder;
  const std::map<std::string, JsonValue> have =
      StableGroups(collection, shape, actual, "", &holder, lines);
  const std::map<std::string, JsonValue> want =
      StableGroups(collection, shape, expected, " (expected)", &holder, lines);
  auto items = [](const JsonValue& array) {
    return std::to_string(array.Size()) + (array.Size() == 1 ? " item" : " items");
  };
  auto a = have.begin();
  auto e = want.begin();
  while (a != have.end() || e != want.end()) {
    if (e == want.end() || (a != have.end() && a->first < e->first)) {
      lines->push_back(collection + " group " + a->first + ": unexpected, " + items(a->second));
      ++a;
    } else if (a == have.end() || e->first < a->first) {
      lines->push_back(collection + " group " + e->first + ": missing, expected " +
                       items(e->second));
      ++e;
    } else {
      std::string difference;
      if (FindDifference(a->second, e->second, "", &difference)) {
        lines->push_back(collection + " group " + a->first + ": items in seq order: " +
                         difference);
      }
      ++a;
      ++e;
    }
  }
}

}  // namespace

DocumentSet EmptyDocumentSet(const Config& config) {
  DocumentSet set;
  for (const std::string& collection : config.CollectionNames()) set.collections[collection];
  for (const ProjectionConfig& projection : config.projections) {
    if (projection.kind != ProjectionConfig::Kind::kBuckets) continue;
    BucketShape& shape = set.buckets[projection.collection];
    shape.by = projection.by.text;
    shape.field = projection.field;
    shape.size = projection.size;
    shape.stable = projection.layout == ProjectionConfig::BucketLayout::kStable;
  }
  return set;
}

Status ParseDocumentSet(const std::string& text, DocumentSet* out) {
  JsonDocument doc;
  DENORMD_RETURN_IF_ERROR(ParseJson(text, &doc));
  *out = DocumentSet();
  if (!doc.IsObject()) {
    return Status::InvalidInput(
        "expected documents are one JSON object {\"collections\": {NAME: {ID: DOCUMENT}}, "
        "\"dead\": N, \"stale\": N}");
  }
  bool has_collections = false;
  for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it) {
    const std::string key = NameOf(it->name);
    const JsonValue& value = it->value;
    if (key == "collections") {
      has_collections = true;
      if (!value.IsObject()) return Status::InvalidInput("collections: not a JSON object");
      for (auto c = value.MemberBegin(); c != value.MemberEnd(); ++c) {
        const std::string collection = NameOf(c->name);
        if (!c->value.IsObject()) {
          return Status::InvalidInput("collections." + collection +
                                      ": not a JSON object of documents by id");
        }
        auto& docs = out->collections[collection];
        for (auto d = c->value.MemberBegin(); d != c->value.MemberEnd(); ++d) {
          if (!d->value.IsObject()) {
            return Status::InvalidInput("collections." + collection + "." + NameOf(d->name) +
                                        ": a document must be a JSON object");
          }
          docs[NameOf(d->name)] = ToJson(d->value);
        }
      }
    } else if (key == "buckets") {
      if (!value.IsObject()) return Status::InvalidInput("buckets: not a JSON object");
      for (auto b = value.MemberBegin(); b != value.MemberEnd(); ++b) {
        const std::string collection = NameOf(b->name);
        DENORMD_RETURN_IF_ERROR(
            ParseShape("buckets." + collection, b->value, &out->buckets[collection]));
      }
    } else if (key == "dead" || key == "stale") {
      if (!value.IsUint64()) {
        return Status::InvalidInput(key + ": not a whole number >= 0");
      }
      (key == "dead" ? out->dead : out->stale) = value.GetUint64();
    } else {
      return Status::InvalidInput("unknown key \"" + key +
                                  "\" (expected collections, buckets, dead, stale)");
    }
  }
  if (!has_collections) return Status::InvalidInput("no \"collections\"");
  return Status::Ok();
}

std::string DocumentSetJson(const DocumentSet& set) {
  rapidjson::StringBuffer buffer;
  PrettyWriter w(buffer);
  w.SetIndent(' ', 1);
  w.StartObject();
  if (!set.buckets.empty()) {
    w.Key("buckets");
    w.StartObject();
    for (const auto& shape : set.buckets) {
      WriteString(shape.first, &w);
      WriteShape(shape.second, &w);
    }
    w.EndObject();
  }
  w.Key("collections");
  w.StartObject();
  for (const auto& collection : set.collections) {
    WriteString(collection.first, &w);
    w.StartObject();
    for (const auto& doc : collection.second) {
      WriteString(doc.first, &w);
      JsonDocument parsed;
      if (ParseJson(doc.second, &parsed).ok()) {
        WriteSorted(parsed, &w);
      } else {
        WriteString(doc.second, &w);  // never from a store: documents are JSON
      }
    }
    w.EndObject();
  }
  w.EndObject();
  if (set.dead) {
    w.Key("dead");
    w.Uint64(*set.dead);
  }
  if (set.stale) {
    w.Key("stale");
    w.Uint64(*set.stale);
  }
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

std::vector<std::string> DiffDocumentSets(const DocumentSet& actual, const DocumentSet& expected,
                                          const DiffOptions& options) {
  std::vector<std::string> lines;
  std::map<std::string, BucketShape> shapes = expected.buckets;
  for (const auto& shape : actual.buckets) {
    auto other = expected.buckets.find(shape.first);
    if (other != expected.buckets.end() && other->second != shape.second) {
      lines.push_back("buckets " + shape.first + ": " + ShapeJson(shape.second) +
                      " != " + ShapeJson(other->second));
    }
    shapes[shape.first] = shape.second;
  }
  std::set<std::string> names;
  for (const auto& c : actual.collections) names.insert(c.first);
  for (const auto& c : expected.collections) names.insert(c.first);
  const std::map<std::string, std::string> none;
  for (const std::string& name : names) {
    auto a = actual.collections.find(name);
    auto e = expected.collections.find(name);
    const auto& have = a == actual.collections.end() ? none : a->second;
    const auto& want = e == expected.collections.end() ? none : e->second;
    auto shape = shapes.find(name);
    if (shape != shapes.end() && shape->second.stable && !options.bucket_positions) {
      DiffStableBuckets(name, shape->second, have, want, &lines);
    } else {
      DiffDocuments(name, have, want, &lines);
    }
  }
  if (actual.dead && expected.dead && *actual.dead != *expected.dead) {
    lines.push_back("dead letters: " + std::to_string(*actual.dead) +
                    " != " + std::to_string(*expected.dead));
  }
  if (actual.stale && expected.stale && *actual.stale != *expected.stale) {
    lines.push_back("stale events: " + std::to_string(*actual.stale) +
                    " != " + std::to_string(*expected.stale));
  }
  return lines;
}

std::string FirstDifference(const JsonValue& actual, const JsonValue& expected) {
  std::string out;
  FindDifference(actual, expected, "", &out);
  return out;
}

}  // namespace denormd
