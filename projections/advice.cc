#include "projections/advice.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/text.h"
#include "projections/relation.h"

namespace denormd {

namespace {

constexpr size_t kPage = 1000;

// Whether an id is in the sample: the same ids on every run and store.
bool Sampled(const std::string& id, double sample) {
  if (sample >= 1.0) return true;
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : id) hash = (hash ^ c) * 1099511628211ull;
  return static_cast<double>(hash % 1000000) < sample * 1000000.0;
}

// The words of a normalized derivation ("ids book via authorIds limit 3").
std::string KindOf(const std::string& normalized) {
  return normalized.substr(0, normalized.find(' '));
}
std::optional<uint64_t> LimitOf(const std::string& normalized) {
  const std::string key = " limit ";
  size_t at = normalized.find(key);
  if (at == std::string::npos) return std::nullopt;
  return std::strtoull(normalized.c_str() + at + key.size(), nullptr, 10);
}

// The edges of one relation as a bipartite graph, counted from each side:
// the distinct keys on the right each key on the left names (an entity and
// the ids it names, a link's `from` and its `to`s), and the other way round.
// Keys without edges are not counted.
struct Edges {
  // A left key's distinct rights, at once (an entity's own targets).
  void AddAll(const std::string& left, const std::vector<std::string>& rights) {
    if (rights.empty()) return;
    left_count[left] = rights.size();
    for (const std::string& right : rights) right_count[right]++;
  }
  // One edge of a left key that may name a right many times (link rows).
  void AddPair(const std::string& left, const std::string& right) {
    pending[left].insert(right);
  }
  void Finish() {
    for (const auto& entry : pending) {
      left_count[entry.first] = entry.second.size();
      for (const std::string& right : entry.second) right_count[right]++;
    }
    pending.clear();
  }

  std::map<std::string, std::set<std::string>> pending;
  std::map<std::string, uint64_t> left_count;
  std::map<std::string, uint64_t> right_count;
};

// Scaled by 1 / sample: counts over sampled referrers estimate all of them.
std::map<std::string, uint64_t> Scaled(std::map<std::string, uint64_t> counts, double sample) {
  if (sample >= 1.0) return counts;
  for (auto& entry : counts) {
    entry.second = static_cast<uint64_t>(std::llround(entry.second / sample));
  }
  return counts;
}

std::string FieldPlace(const ProjectionConfig& projection, const std::string& field) {
  return "projections." + projection.name + (field.empty() ? "" : ".fields." + field);
}

void Recommend(const ProjectionPlan& plan, const LimitsConfig& limits, ModelAdvice* advice) {
  const Config& config = plan.config();
  for (const FieldFanOut& f : advice->fields) {
    const ProjectionConfig& projection = *config.FindProjection(f.projection);
    const std::string where = FieldPlace(projection, f.field);
    const Distribution& members = f.members_per_document;
    if ((f.kind == "ids" || f.kind == "embed") && !f.limit && members.max > limits.max_members) {
      const std::string largest = members.top.empty() ? "" : members.top.front().first;
      std::string suggestion =
          "add `limit: " +
          std::to_string(std::max<uint64_t>(1, std::min(members.p99, limits.max_members))) +
          "` to " + where + " (the first members in its order; the p99 document keeps all)";
      if (f.kind == "embed" && !f.path.empty()) {
        suggestion += "; or all of them in pages, a projection beside it: " + f.projection + "_" +
                      f.field + ": {buckets: " + f.member_type + ", by: " + f.path +
                      ", size: 100}";
      }
      advice->recommendations.push_back(
          {"unbounded-members", where,
           f.document_type + " " + largest + " holds " + FormatCount(members.max) + " " + f.member_type +
               " members in " + f.field + " (p50 " + FormatCount(members.p50) + ", p99 " +
               FormatCount(members.p99) + "; threshold max_members " + FormatCount(limits.max_members) +
               "): its document grows with them and every change of one rewrites all of it",
           suggestion});
    }
    const Distribution& documents = f.documents_per_member;
    if (f.kind == "lookup" && documents.max > limits.fanout_warn) {
      const std::string hottest = documents.top.empty() ? "" : documents.top.front().first;
      advice->recommendations.push_back(
          {"wide-fanout", where,
           "a change of " + f.member_type + " " + hottest + " rewrites " + FormatCount(documents.max) +
               " " + projection.name + " documents (p50 " + FormatCount(documents.p50) + ", p99 " +
               FormatCount(documents.p99) + " per " + f.member_type + "; threshold fanout_warn " +
               FormatCount(limits.fanout_warn) + ")",
           "copy only what rarely changes: `select: [id]` in " + where +
               " keeps the ids (a change of a " + f.member_type +
               " then rewrites none of them) and readers take the rest from the " +
               f.member_type + " documents; or select fewer fields"});
    }
    // Buckets: a typical group spread over many bucket documents, which a
    // reader of the whole group pages through.
    const uint64_t max_pages = limits.max_bucket_pages;
    if (f.kind == "buckets" && f.limit && *f.limit > 0 &&
        (members.p50 + *f.limit - 1) / *f.limit > max_pages) {
      const uint64_t size = (members.p50 + max_pages - 1) / max_pages;
      advice->recommendations.push_back(
          {"bucket-size", where,
           "a " + f.document_type + " has " + FormatCount(members.p50) + " " + f.member_type +
               " members at p50 (p99 " + FormatCount(members.p99) + "), " +
               FormatCount((members.p50 + *f.limit - 1) / *f.limit) + " bucket documents of " +
               FormatCount(*f.limit) + " to read it whole (threshold max_bucket_pages " + FormatCount(max_pages) + ")",
           "if readers read groups whole, set `size: " + std::to_string(size) + "` in " + where +
               " (" + FormatCount(max_pages) + " documents at p50); keep the size if they read a page "
               "at a time"});
    }
  }
  // A copied field that changes often: its observed changes rewrote more
  // documents an hour than fanout_warn.
  for (const FieldFanOut& f : advice->fields) {
    if (f.kind != "lookup") continue;
    const uint64_t hours = std::max<uint64_t>(advice->observed_seconds / 3600, 1);
    for (const FanOutStat& o : advice->observed) {
      if (o.type != f.member_type || o.field.empty() || o.field[0] == '(') continue;
      if (f.derivation.find(o.field) == std::string::npos) continue;  // not shown
      const uint64_t per_hour = o.documents / hours;
      if (per_hour <= limits.fanout_warn) continue;
      const std::string where = FieldPlace(*config.FindProjection(f.projection), f.field);
      advice->recommendations.push_back(
          {"hot-copied-field", where,
           FormatCount(o.changes) + " changes of " + o.type + "." + o.field + " in the last " +
               FormatCount(hours) + " h rewrote " + FormatCount(o.documents) + " documents (" +
               FormatCount(per_hour) + " an hour; at most " + FormatCount(o.max_documents) + ", for " +
               o.type + " " + o.max_id + "; threshold fanout_warn " + FormatCount(limits.fanout_warn) +
               ")",
           "stop copying " + o.field + " into " + where + " (leave it out of select and read it "
           "from the " + o.type + " documents), or accept the writes"});
    }
  }
  uint64_t max_bytes = limits.max_document_bytes;
  std::string limit_name = "max_document_bytes " + FormatCount(max_bytes);
  if (config.feed && config.feed->max_message_bytes < max_bytes) {
    max_bytes = config.feed->max_message_bytes;
    limit_name = "the feed's max_message_bytes " + FormatCount(max_bytes);
  }
  for (const CollectionSizes& c : advice->collections) {
    if (c.bytes.max <= max_bytes / 2) continue;
    const std::string largest = c.bytes.top.empty() ? "" : c.bytes.top.front().first;
    advice->recommendations.push_back(
        {"large-document", "projections." + c.projection,
         "document " + largest + " of " + c.collection + " is " + FormatCount(c.bytes.max) +
             " bytes (p50 " + FormatCount(c.bytes.p50) + ", p99 " + FormatCount(c.bytes.p99) +
             "), more than half of " + limit_name,
         "bound what it holds: a `limit` on its ids and embeds, buckets for long member lists, "
         "or fewer copied fields"});
  }
}

}  // namespace

Distribution Distribute(const std::map<std::string, uint64_t>& counts, size_t top) {
  Distribution d;
  std::vector<std::pair<uint64_t, std::string>> sorted;
  sorted.reserve(counts.size());
  for (const auto& entry : counts) {
    sorted.emplace_back(entry.second, entry.first);
    d.total += entry.second;
  }
  d.keys = sorted.size();
  if (sorted.empty()) return d;
  for (const auto& entry : sorted) {
    size_t bin = 0;
    for (uint64_t v = entry.first; v != 0; v >>= 1) ++bin;
    if (d.bins.size() <= bin) d.bins.resize(bin + 1, 0);
    d.bins[bin]++;
  }
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  // Nearest rank: the value at rank ceil(q * n), counting from the smallest.
  auto at = [&](double q) {
    const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
    return sorted[sorted.size() - std::max<size_t>(rank, 1)].first;
  };
  d.p50 = at(0.50);
  d.p99 = at(0.99);
  d.max = sorted.front().first;
  for (size_t i = 0; i < sorted.size() && i < top; ++i) {
    d.top.emplace_back(sorted[i].second, sorted[i].first);
  }
  return d;
}

std::vector<FanOutStat> FanOutsByField(const std::vector<FanOutStat>& hours) {
  std::map<std::pair<std::string, std::string>, FanOutStat> merged;
  for (const FanOutStat& hour : hours) {
    FanOutStat& m = merged[{hour.type, hour.field}];
    m.type = hour.type;
    m.field = hour.field;
    m.Add(hour);
  }
  std::vector<FanOutStat> out;
  for (auto& entry : merged) {
    entry.second.hour = 0;
    out.push_back(std::move(entry.second));
  }
  std::stable_sort(out.begin(), out.end(), [](const FanOutStat& a, const FanOutStat& b) {
    return a.documents > b.documents;
  });
  return out;
}

Status AdviseModel(const ProjectionPlan& plan, Store* store, const AdviceOptions& options,
                   ModelAdvice* out) {
  const Config& config = plan.config();
  ModelAdvice advice;
  advice.sample = options.sample;
  advice.thresholds = options.thresholds;
  std::unique_ptr<StoreTransaction> txn;
  DENORMD_RETURN_IF_ERROR(store->Begin(&txn));
  DENORMD_RETURN_IF_ERROR(txn->PinReadSnapshot());

  // The edges of every use, keyed like the uses; each entity type read once.
  const std::vector<RelationUse>& uses = plan.relation_uses();
  std::vector<Edges> edges(uses.size());
  std::map<std::string, std::vector<size_t>> uses_of_type;
  for (size_t i = 0; i < uses.size(); ++i) {
    const RelationUse& use = uses[i];
    uses_of_type[use.link ? use.link->link_type() : use.relation->entity_type()].push_back(i);
  }
  // The index rows each live entity read keeps, by type.
  std::map<std::string, std::map<std::string, uint64_t>> rows_of_type;
  for (const auto& entry : uses_of_type) {
    const std::string& type = entry.first;
    std::map<std::string, uint64_t>& rows_of = rows_of_type[type];
    std::string after;
    uint64_t read = 0;
    while (true) {
      std::vector<std::string> ids;
      DENORMD_RETURN_IF_ERROR(txn->source().ListEntityIds(type, after, kPage, &ids));
      if (ids.empty()) break;
      after = ids.back();
      std::vector<EntityKey> keys;
      for (const std::string& id : ids) {
        if (Sampled(id, options.sample)) keys.push_back({type, id});
      }
      std::vector<EntityRecord> records;
      if (!keys.empty()) DENORMD_RETURN_IF_ERROR(txn->source().LoadEntities(keys, &records));
      for (const EntityRecord& record : records) {
        if (!record.live()) continue;
        rows_of[record.key.id] = plan.ReferenceRowsOf(record).size();
        for (size_t i : entry.second) {
          const RelationUse& use = uses[i];
          if (use.link != nullptr) {
            for (const auto& pair : use.link->PairsOf(record)) {
              edges[i].AddPair(pair.first, pair.second);
            }
          } else {
            edges[i].AddAll(record.key.id, use.relation->Targets(record.key.id, *record.data));
          }
        }
      }
      read += records.size();
      advice.entities_read += records.size();
      if (options.on_page) options.on_page(type + " entities", read);
    }
  }

  for (auto& entry : rows_of_type) {
    IndexRowsOfType rows;
    rows.entity_type = entry.first;
    for (const Relation* relation : plan.ForType(entry.first).relations) {
      if (relation->flavour() != Relation::Flavour::kLinked) {
        rows.relations.push_back(relation->name());
      }
    }
    for (const Relation* relation : plan.linked_relations()) {
      if (relation->link()->link_type() == entry.first) {
        rows.linked_relations.push_back(relation->entity_type() + " " + relation->name());
      }
    }
    rows.rows_per_entity = Distribute(entry.second, options.top);
    advice.index_rows.push_back(std::move(rows));
  }

  for (size_t i = 0; i < uses.size(); ++i) {
    const RelationUse& use = uses[i];
    const ProjectionConfig& projection = config.projections[use.projection];
    Edges& e = edges[i];
    e.Finish();
    FieldFanOut f;
    f.projection = projection.name;
    f.field = use.field;
    if (projection.kind == ProjectionConfig::Kind::kBuckets) {
      f.kind = "buckets";
      f.derivation = "buckets " + projection.buckets + " by " + projection.by.text + " size " +
                     FormatCount(projection.size);
      f.document_type = projection.by.text + " group";
      f.member_type = projection.buckets;
      f.limit = projection.size;
    } else {
      for (const auto& field : projection.fields) {
        if (field.first == use.field && field.second.spec) f.derivation = field.second.spec->Normalized();
      }
      f.kind = KindOf(f.derivation);
      f.limit = LimitOf(f.derivation);
      f.document_type = projection.from;
    }
    // Which side of the edges is the document: the target of a `via` (and
    // of a bucket group), the referrer of a `by`, the `from` of a link.
    const bool document_is_left = use.link != nullptr || f.kind == "lookup";
    if (use.link != nullptr) {
      f.relation = use.link->link_type() + ": " + use.link->from().path().text + " -> " +
                   use.link->to().path().text;
      f.member_type = f.derivation.substr(f.kind.size() + 1);
      f.member_type = f.member_type.substr(0, f.member_type.find(' '));
    } else {
      f.relation = use.relation->entity_type() + "." + use.relation->path().text;
      f.path = use.relation->path().text;
      if (projection.kind != ProjectionConfig::Kind::kBuckets) {
        f.member_type = document_is_left ? f.derivation.substr(f.kind.size() + 1)
                                         : use.relation->entity_type();
        f.member_type = f.member_type.substr(0, f.member_type.find(' '));
      }
    }
    // Counts over sampled referrers are estimates; a sampled referrer's own
    // list is exact. Through a link both sides are counted over link rows.
    const bool left_exact = use.link == nullptr;
    std::map<std::string, uint64_t> left =
        left_exact ? std::move(e.left_count) : Scaled(std::move(e.left_count), options.sample);
    std::map<std::string, uint64_t> right = Scaled(std::move(e.right_count), options.sample);
    if (document_is_left) {
      f.members_per_document = Distribute(left, options.top);
      f.documents_per_member = Distribute(right, options.top);
    } else {
      f.members_per_document = Distribute(right, options.top);
      if (f.kind != "buckets") f.documents_per_member = Distribute(left, options.top);
    }
    advice.fields.push_back(std::move(f));
  }

  for (const ProjectionConfig& projection : config.projections) {
    std::map<std::string, uint64_t> sizes;
    std::string after;
    while (true) {
      std::vector<std::string> ids;
      DENORMD_RETURN_IF_ERROR(txn->documents().ListKeys(projection, false, after, kPage, &ids));
      if (ids.empty()) break;
      after = ids.back();
      std::vector<std::string> sampled;
      for (const std::string& id : ids) {
        if (Sampled(id, options.sample)) sampled.push_back(id);
      }
      std::vector<DocumentRow> rows;
      if (!sampled.empty()) DENORMD_RETURN_IF_ERROR(txn->documents().Load(projection, sampled, &rows));
      for (const DocumentRow& row : rows) {
        sizes[row.pk ? *row.pk + "/" + row.id : row.id] = row.json.size();
      }
      advice.documents_read += rows.size();
      if (options.on_page) options.on_page(projection.collection + " documents", sizes.size());
    }
    advice.collections.push_back(
        {projection.collection, projection.name, Distribute(sizes, options.top)});
  }
  // What changes cost, as the daemon observed them: the last 24 hours.
  std::vector<FanOutStat> hours;
  DENORMD_RETURN_IF_ERROR(txn->ledger().ReadFanOuts(24 * 3600, &hours));
  advice.observed = FanOutsByField(hours);
  int64_t oldest = 0, newest = 0;
  for (const FanOutStat& hour : hours) {
    oldest = oldest == 0 ? hour.hour : std::min(oldest, hour.hour);
    newest = std::max(newest, hour.hour);
  }
  advice.observed_seconds = static_cast<uint64_t>((newest - oldest) / 3600 + 1) * 3600;
  Recommend(plan, options.thresholds, &advice);
  *out = std::move(advice);
  return Status::Ok();
}

}  // namespace denormd
