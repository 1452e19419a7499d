#include "daemon/advise_report.h"

#include <algorithm>
#include <sstream>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "common/text.h"

namespace denormd {

namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void WriteString(JsonWriter& w, const std::string& s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// "p50 3, p99 40, max 27,118 (a0 27,118, a1 9,002)"
std::string Figures(const Distribution& d) {
  if (d.keys == 0) return "none";
  std::string out = "p50 " + FormatCount(d.p50) + ", p99 " + FormatCount(d.p99) + ", max " +
                    FormatCount(d.max);
  if (!d.top.empty()) {
    out += " (";
    for (size_t i = 0; i < d.top.size(); ++i) {
      out += (i ? ", " : "") + d.top[i].first + " " + FormatCount(d.top[i].second);
    }
    out += ")";
  }
  return out;
}

void WriteDistribution(JsonWriter& w, const char* key, const Distribution& d) {
  w.Key(key);
  w.StartObject();
  w.Key("keys");
  w.Uint64(d.keys);
  w.Key("total");
  w.Uint64(d.total);
  w.Key("p50");
  w.Uint64(d.p50);
  w.Key("p99");
  w.Uint64(d.p99);
  w.Key("max");
  w.Uint64(d.max);
  w.Key("top");
  w.StartArray();
  for (const auto& entry : d.top) {
    w.StartArray();
    WriteString(w, entry.first);
    w.Uint64(entry.second);
    w.EndArray();
  }
  w.EndArray();
  w.EndObject();
}

}  // namespace

std::string FormatAdvice(const ModelAdvice& advice, const std::string& schema) {
  std::ostringstream out;
  out << "schema " << schema << ": " << FormatCount(advice.entities_read) << " entities and "
      << FormatCount(advice.documents_read) << " documents read";
  if (advice.sample < 1.0) {
    out << " (a sample of " << advice.sample * 100
        << " % by id hash; counts per document and per member over the sample, scaled: "
           "estimates)";
  } else {
    out << " (all of them)";
  }
  out << "\n\nfan-out, per field that reads other entities:\n";
  if (advice.fields.empty()) out << "  (none: no field reads other entities)\n";
  for (const FieldFanOut& f : advice.fields) {
    out << "  " << f.projection << (f.field.empty() ? "" : "." + f.field) << "  (" << f.derivation
        << ")\n";
    out << "    " << f.member_type << " per " << f.document_type
        << (f.kind == "buckets" ? "" : " document") << ": " << Figures(f.members_per_document);
    if (f.limit && f.kind == "buckets") {
      const uint64_t size = std::max<uint64_t>(*f.limit, 1);
      out << "; bucket size " << *f.limit << ": up to "
          << CountOf((f.members_per_document.max + size - 1) / size, "bucket document")
          << " a group";
    } else if (f.limit) {
      out << "; limit " << *f.limit;
    }
    out << "\n";
    if (f.kind != "buckets") {
      out << "    " << f.projection << " documents per " << f.member_type
          << " (what one change of it rewrites" << (f.kind == "lookup" ? "" : " at most")
          << "): " << Figures(f.documents_per_member) << "\n";
    }
  }
  out << "\ndocument sizes (bytes of the stored JSON), per collection:\n";
  for (const CollectionSizes& c : advice.collections) {
    out << "  " << c.collection;
    if (c.collection != c.projection) out << " (" << c.projection << ")";
    out << ": " << CountOf(c.bytes.keys, "document") << ", " << Figures(c.bytes) << "\n";
  }
  out << "\nrecommendations (thresholds: limits.max_members " << advice.thresholds.max_members
      << ", limits.fanout_warn " << advice.thresholds.fanout_warn
      << ", limits.max_document_bytes " << advice.thresholds.max_document_bytes << "):\n";
  if (advice.recommendations.empty()) out << "  none: every figure is within its threshold\n";
  for (const Recommendation& r : advice.recommendations) {
    out << "  [" << r.rule << "] " << r.where << ": " << r.finding << "\n    -> " << r.suggestion
        << "\n";
  }
  return out.str();
}

std::string AdviceJson(const ModelAdvice& advice, const std::string& schema) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("schema");
  WriteString(w, schema);
  w.Key("sample");
  w.Double(advice.sample);
  w.Key("entities_read");
  w.Uint64(advice.entities_read);
  w.Key("documents_read");
  w.Uint64(advice.documents_read);
  w.Key("thresholds");
  w.StartObject();
  w.Key("max_members");
  w.Uint64(advice.thresholds.max_members);
  w.Key("fanout_warn");
  w.Uint64(advice.thresholds.fanout_warn);
  w.Key("max_document_bytes");
  w.Uint64(advice.thresholds.max_document_bytes);
  w.EndObject();
  w.Key("fields");
  w.StartArray();
  for (const FieldFanOut& f : advice.fields) {
    w.StartObject();
    w.Key("projection");
    WriteString(w, f.projection);
    w.Key("field");
    WriteString(w, f.field);
    w.Key("kind");
    WriteString(w, f.kind);
    w.Key("derivation");
    WriteString(w, f.derivation);
    w.Key("document_type");
    WriteString(w, f.document_type);
    w.Key("member_type");
    WriteString(w, f.member_type);
    w.Key("relation");
    WriteString(w, f.relation);
    w.Key("limit");
    if (f.limit) {
      w.Uint64(*f.limit);
    } else {
      w.Null();
    }
    WriteDistribution(w, "members_per_document", f.members_per_document);
    WriteDistribution(w, "documents_per_member", f.documents_per_member);
    w.EndObject();
  }
  w.EndArray();
  w.Key("collections");
  w.StartArray();
  for (const CollectionSizes& c : advice.collections) {
    w.StartObject();
    w.Key("collection");
    WriteString(w, c.collection);
    w.Key("projection");
    WriteString(w, c.projection);
    WriteDistribution(w, "bytes", c.bytes);
    w.EndObject();
  }
  w.EndArray();
  w.Key("recommendations");
  w.StartArray();
  for (const Recommendation& r : advice.recommendations) {
    w.StartObject();
    w.Key("rule");
    WriteString(w, r.rule);
    w.Key("where");
    WriteString(w, r.where);
    w.Key("finding");
    WriteString(w, r.finding);
    w.Key("suggestion");
    WriteString(w, r.suggestion);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

}  // namespace denormd
