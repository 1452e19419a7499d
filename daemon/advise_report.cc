#include "daemon/advise_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/text.h"
#include "projections/fanout_json.h"
#include "projections/json_writer.h"

namespace denormd {

namespace {

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
  WriteMember(w, "keys", d.keys);
  WriteMember(w, "total", d.total);
  WriteMember(w, "p50", d.p50);
  WriteMember(w, "p99", d.p99);
  WriteMember(w, "max", d.max);
  w.Key("top");
  w.StartArray();
  for (const auto& entry : d.top) {
    w.StartArray();
    WriteJsonString(w, entry.first);
    w.Uint64(entry.second);
    w.EndArray();
  }
  w.EndArray();
  w.EndObject();
}

// What a field's two distributions count, as both reports caption them:
// "book per author document", "books documents per author".
std::string FieldName(const FieldFanOut& f) {
  return f.projection + (f.field.empty() ? "" : "." + f.field);
}
std::string MembersCaption(const FieldFanOut& f) {
  return f.member_type + " per " + f.document_type + (f.kind == "buckets" ? "" : " document");
}
std::string DocumentsCaption(const FieldFanOut& f) {
  return f.projection + " documents per " + f.member_type;
}

// "in author_id link side order book_id, book_id link side order author_id,
// author_id to book_id pairs; and 1 row per linked pair: book through
// book_author from author_id to book_id"
std::string IndexRowsCaption(const IndexRowsOfType& r) {
  std::string out = "in " + Joined(r.relations);
  if (!r.linked_relations.empty()) {
    out += "; and " + CountOf(r.linked_relations.size(), "row") + " per linked pair: " +
           Joined(r.linked_relations);
  }
  return out;
}

std::string HtmlEscaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A bin's range as its label: "0", "1", "2-3", "4-7", ...
std::string BinLabel(size_t bin) {
  if (bin == 0) return "0";
  const uint64_t lo = uint64_t{1} << (bin - 1);
  const uint64_t hi = (uint64_t{1} << bin) - 1;
  return lo == hi ? FormatCount(lo) : FormatCount(lo) + "-" + FormatCount(hi);
}

// A histogram of `d`'s bins as an inline SVG: one bar per bin, its height
// the keys in it (a square-root scale, so that a bin of one key among
// thousands stays visible), the bin's range under it.
std::string HistogramSvg(const Distribution& d, const std::string& what) {
  constexpr int kWidth = 460, kHeight = 150, kLeft = 40, kBottom = 34, kTop = 14;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" role=\"img\" aria-label=\"" << HtmlEscaped(what) << "\">";
  svg << "<line x1=\"" << kLeft << "\" y1=\"" << kHeight - kBottom << "\" x2=\"" << kWidth
      << "\" y2=\"" << kHeight - kBottom << "\" class=\"axis\"/>";
  uint64_t most = 0;
  for (uint64_t n : d.bins) most = std::max(most, n);
  if (d.bins.empty() || most == 0) {
    svg << "<text x=\"" << kLeft << "\" y=\"" << kHeight / 2 << "\">nothing measured</text></svg>";
    return svg.str();
  }
  // From the first bin holding a key (sizes start in the hundreds).
  size_t first = 0;
  while (d.bins[first] == 0) ++first;
  const size_t shown = d.bins.size() - first;
  const double slot = static_cast<double>(kWidth - kLeft) / static_cast<double>(shown);
  const double plot = kHeight - kBottom - kTop;
  svg << "<text x=\"2\" y=\"" << kTop + 4 << "\" class=\"tick\">" << FormatCount(most)
      << "</text>";
  for (size_t i = first; i < d.bins.size(); ++i) {
    const double h = d.bins[i] == 0 ? 0 : std::max(2.0, plot * std::sqrt(static_cast<double>(d.bins[i]) /
                                                                  static_cast<double>(most)));
    const double x = kLeft + (i - first) * slot + slot * 0.1;
    svg << "<rect class=\"bar\" x=\"" << x << "\" y=\"" << kHeight - kBottom - h << "\" width=\""
        << slot * 0.8 << "\" height=\"" << h << "\"><title>" << BinLabel(i) << ": "
        << CountOf(d.bins[i], "key") << "</title></rect>";
    if (shown <= 8 || (i - first) % 2 == 0) {
      svg << "<text class=\"tick\" x=\"" << x << "\" y=\"" << kHeight - kBottom + 14 << "\">"
          << BinLabel(i) << "</text>";
    }
  }
  svg << "</svg>";
  return svg.str();
}

void HtmlFigure(std::ostringstream& out, const std::string& title, const Distribution& d) {
  out << "<figure><figcaption>" << HtmlEscaped(title) << "<br><small>" << HtmlEscaped(Figures(d))
      << "</small></figcaption>" << HistogramSvg(d, title) << "</figure>\n";
}

}  // namespace

std::string AdviceHtml(const ModelAdvice& advice, const std::string& schema) {
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<title>denormd advise: " << HtmlEscaped(schema) << "</title><style>"
         "body{font:14px/1.4 sans-serif;margin:24px;color:#222;max-width:1000px}"
         "h1{font-size:20px}h2{font-size:16px;margin-top:28px}"
         "section{display:flex;flex-wrap:wrap;gap:12px;border-top:1px solid #ddd;padding-top:8px}"
         "section h3{width:100%;font-size:14px;margin:4px 0}"
         "figure{margin:0}figcaption{font-size:13px}small{color:#555}"
         ".bar{fill:#2f6db5}.axis{stroke:#888}.tick{font-size:10px;fill:#555}"
         ".rec{background:#fff6e0;border-left:4px solid #e0a000;padding:6px 10px;margin:8px 0}"
         "</style></head><body>\n";
  out << "<h1>denormd advise: schema " << HtmlEscaped(schema) << "</h1>\n<p>"
      << FormatCount(advice.entities_read) << " entities and " << FormatCount(advice.documents_read)
      << " documents read"
      << (advice.sample < 1.0 ? " (a sample by id hash: counts per key are scaled estimates)"
                              : " (all of them)")
      << ". Histograms: keys per power-of-two bin of their count, bar heights on a square-root "
         "scale (hover a bar for its count).</p>\n";
  out << "<h2>Recommendations</h2>\n";
  if (advice.recommendations.empty()) out << "<p>None: every figure is within its threshold.</p>\n";
  for (const Recommendation& r : advice.recommendations) {
    out << "<div class=\"rec\"><b>" << HtmlEscaped(r.rule) << "</b> " << HtmlEscaped(r.where)
        << ": " << HtmlEscaped(r.finding) << "<br>&rarr; " << HtmlEscaped(r.suggestion) << "</div>\n";
  }
  out << "<h2>Fan-out, per field that reads other entities</h2>\n";
  for (const FieldFanOut& f : advice.fields) {
    out << "<section><h3>" << HtmlEscaped(FieldName(f)) << " <small>"
        << HtmlEscaped(f.derivation) << "</small></h3>\n";
    HtmlFigure(out, MembersCaption(f), f.members_per_document);
    if (f.kind != "buckets") HtmlFigure(out, DocumentsCaption(f), f.documents_per_member);
    out << "</section>\n";
  }
  out << "<h2>Document sizes (bytes of the stored JSON)</h2>\n";
  for (const CollectionSizes& c : advice.collections) {
    out << "<section><h3>" << HtmlEscaped(c.collection)
        << (c.collection != c.projection ? " <small>(" + HtmlEscaped(c.projection) + ")</small>" : "")
        << "</h3>\n";
    HtmlFigure(out, CountOf(c.bytes.keys, "document"), c.bytes);
    out << "</section>\n";
  }
  out << "<h2>Index rows each entity keeps (each moves its target's counter)</h2>\n";
  for (const IndexRowsOfType& r : advice.index_rows) {
    out << "<section><h3>" << HtmlEscaped(r.entity_type) << " <small>"
        << HtmlEscaped(IndexRowsCaption(r)) << "</small></h3>\n";
    HtmlFigure(out, "index rows per " + r.entity_type, r.rows_per_entity);
    out << "</section>\n";
  }
  out << "</body></html>\n";
  return out.str();
}

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
    out << "  " << FieldName(f) << "  (" << f.derivation << ")\n";
    out << "    " << MembersCaption(f) << ": " << Figures(f.members_per_document);
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
      out << "    " << DocumentsCaption(f) << " (what one change of it rewrites" << (f.kind == "lookup" ? "" : " at most")
          << "): " << Figures(f.documents_per_member) << "\n";
    }
  }
  out << "\ndocument sizes (bytes of the stored JSON), per collection:\n";
  for (const CollectionSizes& c : advice.collections) {
    out << "  " << c.collection;
    if (c.collection != c.projection) out << " (" << c.projection << ")";
    out << ": " << CountOf(c.bytes.keys, "document") << ", " << Figures(c.bytes) << "\n";
  }
  out << "\nindex rows each entity keeps (a write of one inserts and deletes those that changed,"
         " each moving its target's counter but a join table's), per entity type:\n";
  if (advice.index_rows.empty()) out << "  (none: no entity is named by another's field)\n";
  for (const IndexRowsOfType& r : advice.index_rows) {
    out << "  " << r.entity_type << ": " << Figures(r.rows_per_entity) << "\n    "
        << IndexRowsCaption(r) << "\n";
  }
  out << "\nobserved changes (the statistics run and replay keep, the last 24 hours):\n";
  if (advice.observed.empty()) out << "  (none recorded)\n";
  for (const FanOutStat& o : advice.observed) {
    const double per_second =
        static_cast<double>(o.documents) / static_cast<double>(advice.observed_seconds);
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.3g", per_second);
    out << "  " << o.type << "." << o.field << ": " << CountOf(o.changes, "change") << " in "
        << advice.observed_seconds / 3600 << " h, " << FormatCount(o.changes ? o.documents / o.changes : 0)
        << " documents per change on average, at most " << FormatCount(o.max_documents) << " ("
        << o.type << " " << o.max_id << "): " << rate << " documents/s\n";
  }
  out << "\nrecommendations (thresholds: limits.max_members " << advice.thresholds.max_members
      << ", limits.fanout_warn " << advice.thresholds.fanout_warn
      << ", limits.max_document_bytes " << advice.thresholds.max_document_bytes
      << ", limits.max_bucket_pages " << advice.thresholds.max_bucket_pages << "):\n";
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
  WriteMember(w, "schema", schema);
  w.Key("sample");
  w.Double(advice.sample);
  WriteMember(w, "entities_read", advice.entities_read);
  WriteMember(w, "documents_read", advice.documents_read);
  w.Key("thresholds");
  w.StartObject();
  WriteMember(w, "max_members", advice.thresholds.max_members);
  WriteMember(w, "fanout_warn", advice.thresholds.fanout_warn);
  WriteMember(w, "max_document_bytes", advice.thresholds.max_document_bytes);
  WriteMember(w, "max_bucket_pages", advice.thresholds.max_bucket_pages);
  w.EndObject();
  w.Key("fields");
  w.StartArray();
  for (const FieldFanOut& f : advice.fields) {
    w.StartObject();
    WriteMember(w, "projection", f.projection);
    WriteMember(w, "field", f.field);
    WriteMember(w, "kind", f.kind);
    WriteMember(w, "derivation", f.derivation);
    WriteMember(w, "document_type", f.document_type);
    WriteMember(w, "member_type", f.member_type);
    WriteMember(w, "relation", f.relation);
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
    WriteMember(w, "collection", c.collection);
    WriteMember(w, "projection", c.projection);
    WriteDistribution(w, "bytes", c.bytes);
    w.EndObject();
  }
  w.EndArray();
  w.Key("index_rows");
  w.StartArray();
  for (const IndexRowsOfType& r : advice.index_rows) {
    w.StartObject();
    WriteMember(w, "entity_type", r.entity_type);
    for (const auto& list : {std::make_pair("relations", &r.relations),
                             std::make_pair("linked_relations", &r.linked_relations)}) {
      w.Key(list.first);
      w.StartArray();
      for (const std::string& name : *list.second) WriteJsonString(w, name);
      w.EndArray();
    }
    WriteDistribution(w, "rows_per_entity", r.rows_per_entity);
    w.EndObject();
  }
  w.EndArray();
  w.Key("observed");
  w.StartArray();
  for (const FanOutStat& o : advice.observed) {
    w.StartObject();
    WriteFanOutStatMembers(w, o);
    WriteMember(w, "seconds", advice.observed_seconds);
    w.EndObject();
  }
  w.EndArray();
  w.Key("recommendations");
  w.StartArray();
  for (const Recommendation& r : advice.recommendations) {
    w.StartObject();
    WriteMember(w, "rule", r.rule);
    WriteMember(w, "where", r.where);
    WriteMember(w, "finding", r.finding);
    WriteMember(w, "suggestion", r.suggestion);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

}  // namespace denormd
