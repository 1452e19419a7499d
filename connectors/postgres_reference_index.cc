#include "connectors/postgres_reference_index.h"

#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <utility>

#include "connectors/postgres_sql.h"
#include "connectors/postgres_work.h"
#include "projections/projection_plan.h"

namespace denormd {

namespace {

// Index ranges as arrays (target, sort hex, id, backward, limit). A range
// without `from` gets the smallest key (forward) or one above every key
// (backward: sort keys start with 0x01 or 0x02, or are empty), so that every
// range is an index range condition, never a filter.
struct RangeArrays {
  explicit RangeArrays(const std::vector<IndexRange>& ranges) {
    std::vector<std::string> targets, sorts, ids, backwards, limits;
    for (const IndexRange& range : ranges) {
      targets.push_back(range.target);
      sorts.push_back(range.from ? HexEncode(range.from->sort) : range.backward ? "ff" : "");
      ids.push_back(range.from ? range.from->id : "");
      backwards.push_back(range.backward ? "t" : "f");
      limits.push_back(range.limit == 0 ? "NULL" : std::to_string(range.limit));
    }
    target = PgTextArray(targets);
    sort = PgTextArray(sorts);
    id = PgTextArray(ids);
    backward = PgTextArray(backwards);
    limit = "{";
    for (size_t i = 0; i < limits.size(); ++i) limit += (i ? "," : "") + limits[i];
    limit += "}";
  }
  std::string target, sort, id, backward, limit;
};

}  // namespace

void WriteIndexRow(JsonWriter& w, const EntityKey& key, const ReferenceRow& row) {
  w.StartArray();
  WriteJsonString(w, key.type);
  WriteJsonString(w, row.relation->name());
  WriteJsonString(w, row.target);
  WriteJsonString(w, HexEncode(row.sort));
  WriteJsonString(w, key.id);
  w.EndArray();
}

std::string InsertIndexRowsSql(const std::string& schema, const std::string& param) {
  return "i as (insert into " + schema + ".refs (type, field, target, id, sort)"
         " select x->>0, x->>1, x->>2, x->>4, decode(x->>3, 'hex')"
         " from jsonb_array_elements(" + param + "::jsonb) x on conflict do nothing"
         " returning type, field, target, id)";
}

std::string DeleteIndexRowsSql(const std::string& schema, const std::string& param) {
  return " d as (delete from " + schema + ".refs r using jsonb_array_elements(" + param +
         "::jsonb) x where r.type = x->>0 and r.field = x->>1 and r.target = x->>2"
         " and r.sort = decode(x->>3, 'hex') and r.id = x->>4"
         " returning r.type, r.field, r.target, r.id)";
}

std::string CountDeltasSql(const std::string& schema, const std::string& counted_rows,
                           const std::string& then) {
  const std::string upsert =
      " insert into " + schema + ".ref_counts as c (type, field, target, count)"
      " select type, field, target, n from delta order by 1, 2, 3"
      " on conflict (type, field, target) do update set count = c.count + excluded.count";
  return " delta as (select type, field, target, sum(n)::bigint as n from ("
         " select type, field, target, -1 as n from d union all"
         " select type, field, target, 1 from i) u where " + counted_rows +
         " group by 1, 2, 3 having sum(n) <> 0)" +
         (then.empty() ? upsert : ", counted as (" + upsert + ") " + then);
}

IndexCounting IndexCountingOf(const ProjectionPlan& plan) {
  std::string uncounted;
  for (const auto& relation : plan.relations()) {
    if (relation->counted()) continue;
    std::string pair = "(";
    try {
      AppendStringLiteral(relation->entity_type(), &pair);
      pair += ", ";
      AppendStringLiteral(relation->name(), &pair);
    } catch (const std::invalid_argument&) {
      continue;  // a name no literal holds: its rows keep counters, unread
    }
    uncounted += (uncounted.empty() ? "" : ", ") + pair + ")";
  }
  IndexCounting counting;
  if (!uncounted.empty()) counting.counted_rows = "(type, field) not in (" + uncounted + ")";
  return counting;
}

// One Scan question: its statement, parameters and the key it is kept by.
struct PostgresReferenceIndex::ScanQuestion {
  ScanQuestion(const std::string& schema, const Relation& relation,
               const std::vector<IndexRange>& ranges, Read read)
      : arrays(ranges), with_data(read == Read::kKeysAndData), whole(AllWhole(ranges)) {
    key = relation.entity_type() + '\x1f' + relation.name() + '\x1f' + (with_data ? "d" : "k") +
          '\x1f' + arrays.target + '\x1f' + arrays.sort + '\x1f' + arrays.id + '\x1f' +
          arrays.backward + '\x1f' + arrays.limit;
    // The rows (target, sort, id) as x: for whole targets one index scan
    // over the targets as an array, not a lateral subquery per target,
    // whose setup costs microseconds a target (20,000 targets of two rows
    // each, a batch's books asking for their authors through a link: 23 ms
    // against 78 on the benchmark's server; docs/benchmarks.md).
    // Otherwise per range one index range scan in the range's direction;
    // the backward scan only when a range is backward (a subquery per range
    // costs its setup whether or not it runs: 20,000 probes of one row
    // each, as a link's reconciliation asks, took 60 ms against 78).
    std::string rows;
    if (whole) {
      rows = " from (select r.target, r.sort, r.id from " + schema +
             ".refs r where r.type = $1 and r.field = $2 and r.target = any($3::text[])) x";
    } else {
      const std::string range = ".refs r where r.type = $1 and r.field = $2 and r.target = t.target"
                                " and (r.sort, r.id) ";
      const std::string bound = " (decode(t.sort, 'hex'), t.id collate \"C\")";
      const std::string forward = "(select t.target, r.sort, r.id from " + schema + range + ">=" +
                                  bound + " and not t.backward order by r.sort, r.id limit t.lim)";
      rows = " from unnest($3::text[], $4::text[], $5::text[], $6::bool[], $7::bigint[])"
             " t(target, sort, id, backward, lim) cross join lateral " +
             (AnyBackward(ranges)
                  ? "(" + forward + " union all (select t.target, r.sort, r.id from " + schema +
                        range + "<" + bound +
                        " and t.backward order by r.sort desc, r.id desc limit t.lim))"
                  : forward) +
             " x";
    }
    // Only live entities: the rows of a relation that `denormd apply` is
    // building may name one deleted since (its catch-up removes them).
    sql = with_data ? "select x.target, encode(x.sort, 'hex'), e.id, e.version::text, e.data::text" +
                          rows + " join " + schema + ".entities e on e.type = $1 and e.id = x.id"
                          " and not e.deleted and e.data is not null"
                    : "select x.target, encode(x.sort, 'hex'), x.id" + rows;
  }
  // Whether every range is a whole target (forward from its first row, no
  // limit), each target once: then the rows are those of the targets.
  static bool AllWhole(const std::vector<IndexRange>& ranges) {
    std::set<std::string> targets;
    for (const IndexRange& range : ranges) {
      if (range.from || range.backward || range.limit != 0) return false;
      if (!targets.insert(range.target).second) return false;
    }
    return true;
  }
  static bool AnyBackward(const std::vector<IndexRange>& ranges) {
    for (const IndexRange& range : ranges) {
      if (range.backward) return true;
    }
    return false;
  }
  // Runs the question's statement in `run` (PostgresWork::Run or Defer,
  // given the statement and its parameters).
  template <typename Call>
  auto Ask(const Relation& relation, Call&& run) const {
    if (whole) return run(sql, relation.entity_type(), relation.name(), arrays.target);
    return run(sql, relation.entity_type(), relation.name(), arrays.target, arrays.sort,
               arrays.id, arrays.backward, arrays.limit);
  }
  // Its answer, from the rows of `sql`.
  Status Referrers(const Relation& relation, const pqxx::result& rows,
                   std::vector<Referrer>* out) const {
    for (const auto& row : rows) {
      Referrer referrer;
      referrer.target = row[0].c_str();
      referrer.sort = HexDecode(row[1].c_str());
      referrer.entity.key = {relation.entity_type(), row[2].c_str()};
      if (with_data) {
        referrer.entity.version = ParseVersion(row[3]);
        DENORMD_RETURN_IF_ERROR(ParseData(row[4], &referrer.entity.data));
      }
      out->push_back(std::move(referrer));
    }
    return Status::Ok();
  }

  const RangeArrays arrays;
  const bool with_data;
  const bool whole;  // every range a whole target (AllWhole)
  std::string sql;
  std::string key;
};

void PostgresReferenceIndex::ReadScanAhead(const Relation& relation,
                                           const std::vector<IndexRange>& ranges, Read read) {
  if (ranges.empty()) return;
  auto question = std::make_shared<ScanQuestion>(work_.schema(), relation, ranges, read);
  const uint64_t stamp = work_.index_writes();
  if (scans_ahead_.Ask({question->key}, stamp).empty()) return;
  question->Ask(relation, [&](const std::string& sql, const auto&... parameters) {
    work_.Defer(
        {question->with_data ? "loading referrers ahead" : "finding referrers ahead", "",
         [this, question, stamp, &relation](const pqxx::result& rows) {
           std::map<std::string, std::vector<Referrer>> found;
           DENORMD_RETURN_IF_ERROR(question->Referrers(relation, rows, &found[question->key]));
           scans_ahead_.Arrived({question->key}, stamp, std::move(found));
           return Status::Ok();
         },
         nullptr, /*may_refuse=*/false},
        sql, parameters...);
  });
}

Status PostgresReferenceIndex::Scan(const Relation& relation,
                                    const std::vector<IndexRange>& ranges, Read read,
                                    std::vector<Referrer>* out) {
  if (ranges.empty()) return Status::Ok();
  const ScanQuestion question(work_.schema(), relation, ranges, read);
  const uint64_t stamp = work_.index_writes();
  bool ahead = false;
  DENORMD_RETURN_IF_ERROR(scans_ahead_.Answers(
      {question.key}, stamp, [&] { return work_.SendDeferred("loading referrers"); }, &ahead));
  if (ahead) {
    const std::vector<Referrer>* kept = scans_ahead_.Find(question.key);
    if (kept != nullptr) out->insert(out->end(), kept->begin(), kept->end());
    return Status::Ok();
  }
  if (question.key != last_scan_key_ || last_scan_writes_ != stamp) {
    last_scan_key_.clear();
    last_scan_.clear();
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(
        Guard(question.with_data ? "loading referrers" : "finding referrers", [&] {
          rows = question.Ask(relation, [&](const std::string& sql, const auto&... parameters) {
            return work_.Run(sql, parameters...);
          });
        }));
    DENORMD_RETURN_IF_ERROR(question.Referrers(relation, rows, &last_scan_));
    last_scan_key_ = question.key;
    last_scan_writes_ = stamp;
  }
  out->insert(out->end(), last_scan_.begin(), last_scan_.end());
  return Status::Ok();
}

Status PostgresReferenceIndex::Count(const Relation& relation,
                                     const std::vector<IndexRange>& ranges,
                                     std::map<std::string, uint64_t>* out) {
  std::vector<std::string> whole;
  std::vector<IndexRange> from;
  for (const IndexRange& range : ranges) {
    (*out)[range.target] = 0;
    if (range.from) {
      from.push_back(range);
      from.back().backward = false;
    } else {
      whole.push_back(range.target);
    }
  }
  if (!whole.empty() && !relation.counted()) {
    return Status::Fatal("internal: the counters of relation " + relation.name() +
                         " were asked for; a link's sides and pairs keep none");
  }
  pqxx::result rows;
  if (!whole.empty()) DENORMD_RETURN_IF_ERROR(CountWhole(relation, whole, out));
  if (from.empty()) return Status::Ok();
  const RangeArrays arrays(from);
  DENORMD_RETURN_IF_ERROR(Guard("counting referrers", [&] {
    rows = work_.Run(
        "select b.target, (select count(*) from " + work_.schema() +
            ".refs r where r.type = $1 and r.field = $2 and r.target = b.target"
            " and (r.sort, r.id) >= (decode(b.sort, 'hex'), b.id collate \"C\"))"
            " from unnest($3::text[], $4::text[], $5::text[]) b(target, sort, id)",
        relation.entity_type(), relation.name(), arrays.target, arrays.sort, arrays.id);
  }));
  for (const auto& row : rows) (*out)[row[0].c_str()] = row[1].as<uint64_t>();
  return Status::Ok();
}

namespace {

std::string CountersSql(const std::string& schema) {
  return "select target, count from " + schema +
         ".ref_counts where type = $1 and field = $2 and target = any($3::text[]) and count > 0";
}

}  // namespace

void PostgresReferenceIndex::ReadCountsAhead(const Relation& relation,
                                             const std::vector<std::string>& targets) {
  std::vector<CounterKey> keys;
  for (const std::string& target : targets) {
    keys.emplace_back(relation.entity_type(), relation.name(), target);
  }
  const uint64_t stamp = work_.index_writes();
  std::vector<CounterKey> asked = counters_.Ask(keys, stamp);
  if (asked.empty()) return;
  std::vector<std::string> asked_targets;
  for (const CounterKey& key : asked) asked_targets.push_back(std::get<2>(key));
  work_.Defer({"counting referrers ahead", "",
               [this, asked, stamp, type = relation.entity_type(),
                field = relation.name()](const pqxx::result& rows) {
                 std::map<CounterKey, uint64_t> found;
                 for (const auto& row : rows) {
                   found[{type, field, row[0].c_str()}] = row[1].as<uint64_t>();
                 }
                 counters_.Arrived(asked, stamp, std::move(found));
                 return Status::Ok();
               },
               nullptr, /*may_refuse=*/false},
              CountersSql(work_.schema()), relation.entity_type(), relation.name(),
              PgTextArray(asked_targets));
}

Status PostgresReferenceIndex::CountWhole(const Relation& relation,
                                          const std::vector<std::string>& targets,
                                          std::map<std::string, uint64_t>* out) {
  std::vector<CounterKey> keys;
  for (const std::string& target : targets) {
    keys.emplace_back(relation.entity_type(), relation.name(), target);
  }
  const uint64_t stamp = work_.index_writes();
  bool kept = false;
  DENORMD_RETURN_IF_ERROR(counters_.Answers(
      keys, stamp, [&] { return work_.SendDeferred("counting referrers"); }, &kept));
  if (kept) {
    for (const CounterKey& key : keys) {
      const uint64_t* count = counters_.Find(key);
      (*out)[std::get<2>(key)] = count == nullptr ? 0 : *count;
    }
    return Status::Ok();
  }
  pqxx::result rows;
  DENORMD_RETURN_IF_ERROR(Guard("counting referrers", [&] {
    rows = work_.Run(CountersSql(work_.schema()), relation.entity_type(), relation.name(),
                     PgTextArray(targets));
  }));
  std::map<CounterKey, uint64_t> found;
  for (const auto& row : rows) {
    (*out)[row[0].c_str()] = row[1].as<uint64_t>();
    found[{relation.entity_type(), relation.name(), row[0].c_str()}] = row[1].as<uint64_t>();
  }
  counters_.Keep(keys, stamp, std::move(found));
  return Status::Ok();
}

Status PostgresReferenceIndex::ListTargets(const Relation& relation, const std::string& after,
                                           size_t limit, std::vector<std::string>* out) {
  pqxx::result rows;
  DENORMD_RETURN_IF_ERROR(Guard("listing reference targets", [&] {
    rows = work_.Run("select distinct target from " + work_.schema() +
                         ".refs where type = $1 and field = $2 and target > $3"
                         " order by target limit $4",
                     relation.entity_type(), relation.name(), after,
                     static_cast<int64_t>(limit));
  }));
  for (const auto& row : rows) out->push_back(row[0].c_str());
  return Status::Ok();
}

Status PostgresReferenceIndex::RowsOf(const std::vector<EntityKey>& entities,
                                      std::vector<StoredRow>* out) {
  if (entities.empty()) return Status::Ok();
  std::vector<std::string> types, ids;
  for (const EntityKey& key : entities) {
    types.push_back(key.type);
    ids.push_back(key.id);
  }
  pqxx::result rows;
  DENORMD_RETURN_IF_ERROR(Guard("reading index rows", [&] {
    rows = work_.Run("select r.type, r.id, r.field, r.target, encode(r.sort, 'hex') from " +
                         work_.schema() +
                         ".refs r join unnest($1::text[], $2::text[]) k(type, id)"
                         " on r.type = k.type and r.id = k.id",
                     PgTextArray(types), PgTextArray(ids));
  }));
  for (const auto& row : rows) {
    out->push_back({{row[0].c_str(), row[1].c_str()}, row[2].c_str(), row[3].c_str(),
                    HexDecode(row[4].c_str())});
  }
  return Status::Ok();
}

Status PostgresReferenceIndex::RecountTargets() {
  const std::string& schema = work_.schema();
  const std::string counts = schema + ".ref_counts";
  work_.IndexWritten();
  return Guard("recounting the reference index", [&] {
    work_.Run("with actual as (select type, field, target, count(*) as n from " + schema +
              ".refs where " + work_.counted_rows() + " group by 1, 2, 3),"
              " fixed as (insert into " + counts + " as c (type, field, target, count)"
              " select type, field, target, n from actual order by 1, 2, 3"
              " on conflict (type, field, target) do update set count = excluded.count"
              " where c.count <> excluded.count)"
              " update " + counts + " c set count = 0 where c.count <> 0 and not exists ("
              "select 1 from actual a where a.type = c.type and a.field = c.field"
              " and a.target = c.target)");
  });
}

Status PostgresReferenceIndex::WriteRows(const std::vector<OwnedRows>& writes,
                                         std::vector<WrittenRow>* written) {
  work_.IndexWritten();
  rapidjson::StringBuffer added, removed;
  JsonWriter a(added), r(removed);
  a.StartArray();
  r.StartArray();
  size_t rows = 0;
  // The relations written, to name each row the statement returns.
  std::map<std::pair<std::string, std::string>, const Relation*> relations;
  for (const OwnedRows& write : writes) {
    for (const auto* list : {&write.added, &write.removed}) {
      for (const ReferenceRow& row : *list) {
        WriteIndexRow(list == &write.added ? a : r, write.owner, row);
        relations.emplace(std::make_pair(write.owner.type, row.relation->name()), row.relation);
      }
      rows += list->size();
    }
  }
  a.EndArray();
  r.EndArray();
  if (rows == 0) return Status::Ok();
  // As in PostgresSourceRows::WriteEntities, without the records: the rows
  // actually inserted or deleted move the counters, and are returned.
  const std::string& schema = work_.schema();
  pqxx::result changed;
  DENORMD_RETURN_IF_ERROR(Guard("writing " + std::to_string(rows) + " index rows", [&] {
    changed = work_.Run("with " + InsertIndexRowsSql(schema, "$1") + ", " +
                            DeleteIndexRowsSql(schema, "$2") + "," +
                            CountDeltasSql(schema, work_.counted_rows(),
                                           "select true, type, field, target, id from i union all"
                                           " select false, type, field, target, id from d"),
                        JsonText(added), JsonText(removed));
  }));
  if (written == nullptr) return Status::Ok();
  for (const auto& row : changed) {
    auto relation = relations.find({row[1].c_str(), row[2].c_str()});
    if (relation == relations.end()) {
      return Status::Fatal("internal: writing index rows returned a row of relation " +
                           std::string(row[2].c_str()) + ", which was not written");
    }
    written->push_back({relation->second, row[3].c_str(), row[4].c_str(), row[0].as<bool>()});
  }
  return Status::Ok();
}

}  // namespace denormd
