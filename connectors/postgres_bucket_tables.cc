#include "connectors/postgres_bucket_tables.h"

#include <memory>

#include "connectors/postgres_work.h"

namespace denormd {

// One ProbeBuckets question: its statement, parameters and the key it is
// kept by.
struct PostgresBucketTables::ProbeQuestion {
  ProbeQuestion(PostgresWork& work, const ProjectionConfig& projection,
                const std::vector<std::pair<std::string, IndexKey>>& probes) {
    std::vector<std::string> group_list, sort_list, id_list;
    for (const auto& probe : probes) {
      group_list.push_back(probe.first);
      sort_list.push_back(HexEncode(probe.second.sort));
      id_list.push_back(probe.second.id);
    }
    groups = PgTextArray(group_list);
    sorts = PgTextArray(sort_list);
    ids = PgTextArray(id_list);
    key = projection.name + '\x1f' + groups + '\x1f' + sorts + '\x1f' + ids;
    const std::string table = work.Table(projection);
    const std::string columns = "c.id, c.number, c.seq, encode(c.lo_sort, 'hex'), c.lo_id, c.members";
    const std::string bound = " (decode(p.sort, 'hex'), p.id collate \"C\")";
    const std::string where =
        " from " + table + " c where c.projection = $1 and c.pk = p.grp and c.lo_sort is not null"
        " and (c.lo_sort, c.lo_id) ";
    const std::string window = std::to_string(kProbeWindow);
    // Probes of a group whose keys fall in the same bucket (the one whose lo
    // is the last at or before them; none: before the group's first) have
    // the same window: only the first of them is answered. A hot group's
    // appends, hundreds in a batch, are then one window, not hundreds.
    const std::string homes =
        "with p as (select * from unnest($2::text[], $3::text[], $4::text[])"
        " with ordinality p(grp, sort, id, i)),"
        " q as materialized (select distinct on (p.grp, b.lo_sort, b.lo_id) p.*"
        " from p left join lateral (select c.lo_sort, c.lo_id" + where + "<=" + bound +
        " order by c.lo_sort desc, c.lo_id desc limit 1) b on true"
        " order by p.grp, b.lo_sort, b.lo_id, p.i)";
    sql = homes + " select p.i, w.below, w.id, w.number, w.seq, w.lo_sort, w.lo_id, w.members"
          " from q p"
          " cross join lateral ((select true as below, " + columns + where + "<=" + bound +
          " order by c.lo_sort desc, c.lo_id desc limit " + window + ")"
          " union all (select false, " + columns + where + ">" + bound +
          " order by c.lo_sort, c.lo_id limit " + window + ")) w(below, id, number, seq,"
          " lo_sort, lo_id, members)";
  }

  static void Slots(const pqxx::result& rows, std::vector<BucketSlot>* out) {
    for (const auto& row : rows) {
      BucketSlot slot;
      slot.probe = row[0].as<size_t>() - 1;
      slot.below = row[1].as<bool>();
      slot.id = row[2].c_str();
      slot.meta.number = row[3].as<uint64_t>();
      slot.meta.seq = row[4].as<int64_t>();
      slot.meta.lo = IndexKey{HexDecode(row[5].c_str()), row[6].c_str()};
      slot.meta.members = row[7].as<uint64_t>();
      out->push_back(std::move(slot));
    }
  }

  std::string groups, sorts, ids, key, sql;
};

void PostgresBucketTables::ReadProbesAhead(
    const ProjectionConfig& projection,
    const std::vector<std::pair<std::string, IndexKey>>& probes) {
  if (probes.empty()) return;
  auto question = std::make_shared<ProbeQuestion>(work_, projection, probes);
  const uint64_t stamp = work_.document_writes(projection.collection);
  if (probes_ahead_.Ask({question->key}, stamp).empty()) return;
  work_.Defer({"finding buckets of " + projection.name + " ahead", "",
               [this, question, stamp](const pqxx::result& rows) {
                 std::map<std::string, std::vector<BucketSlot>> found;
                 ProbeQuestion::Slots(rows, &found[question->key]);
                 probes_ahead_.Arrived({question->key}, stamp, std::move(found));
                 return Status::Ok();
               },
               nullptr, /*may_refuse=*/false},
              question->sql, projection.name, question->groups, question->sorts, question->ids);
}

Status PostgresBucketTables::ProbeBuckets(
    const ProjectionConfig& projection,
    const std::vector<std::pair<std::string, IndexKey>>& probes, std::vector<BucketSlot>* out) {
  if (probes.empty()) return Status::Ok();
  const ProbeQuestion question(work_, projection, probes);
  const uint64_t stamp = work_.document_writes(projection.collection);
  bool ahead = false;
  DENORMD_RETURN_IF_ERROR(probes_ahead_.Answers(
      {question.key}, stamp,
      [&] { return work_.SendDeferred("finding buckets of " + projection.name); }, &ahead));
  if (ahead) {
    const std::vector<BucketSlot>* kept = probes_ahead_.Find(question.key);
    if (kept != nullptr) out->insert(out->end(), kept->begin(), kept->end());
    return Status::Ok();
  }
  pqxx::result rows;
  DENORMD_RETURN_IF_ERROR(Guard("finding buckets of " + projection.name, [&] {
    rows = work_.Run(question.sql, projection.name, question.groups, question.sorts,
                     question.ids);
  }));
  ProbeQuestion::Slots(rows, out);
  return Status::Ok();
}

Status PostgresBucketTables::MaxBucketNumbers(const ProjectionConfig& projection,
                                              const std::vector<std::string>& groups,
                                              std::map<std::string, uint64_t>* out) {
  if (groups.empty()) return Status::Ok();
  pqxx::result rows;
  DENORMD_RETURN_IF_ERROR(Guard("numbering buckets of " + projection.name, [&] {
    rows = work_.Run("select g, (select c.number from " + work_.Table(projection) +
                         " c where c.projection = $1 and c.pk = g and c.number is not null"
                         " order by c.number desc limit 1) from unnest($2::text[]) g",
                     projection.name, PgTextArray(groups));
  }));
  for (const auto& row : rows) {
    if (!row[1].is_null()) (*out)[row[0].c_str()] = row[1].as<uint64_t>();
  }
  return Status::Ok();
}

Status PostgresBucketTables::RespaceBuckets(const ProjectionConfig& projection,
                                            const std::string& group, int64_t after,
                                            int64_t before, int64_t step, uint64_t* written) {
  const std::string table = work_.Table(projection);
  work_.DocumentsWritten(projection.collection);
  // $3 after, $4 before, $5 step. `g`: the group's buckets; `n`: how many
  // lie before the gap (`head`) and after it (`tail`); `r`: the new seqs
  // of the side with fewer, in the order of their lo.
  const std::string update =
      "update " + table + " c set seq = r.seq, doc = jsonb_set(c.doc, '{seq}', to_jsonb(r.seq))"
      " from (with g as (select id, seq, lo_sort, lo_id from " + table +
      " where projection = $1 and pk = $2 and lo_sort is not null),"
      " n as (select count(*) filter (where seq < $4) as head,"
      " count(*) filter (where seq > $3) as tail from g)"
      " select g.id, case when n.head < n.tail"
      " then $4::bigint - (n.head - row_number() over (order by g.lo_sort, g.lo_id) + 1) * $5::bigint"
      " else $3::bigint + row_number() over (order by g.lo_sort, g.lo_id) * $5::bigint end as seq"
      " from g, n where case when n.head < n.tail then g.seq < $4 else g.seq > $3 end) r"
      " where c.id = r.id";
  return Guard("respacing the buckets of " + projection.name, [&] {
    if (!work_.Captured(projection)) {
      pqxx::result result = work_.Run(update, projection.name, group, after, before, step);
      *written += result.affected_rows();
      return;
    }
    // A re-spacing changes the seq of each bucket it moves: each is a
    // document change.
    pqxx::result result =
        work_.Run("with w as (" + update + " returning c.id, c.pk, c.doc), " +
                      work_.CaptureCte("(select w.id, w.pk, w.doc, 1 as k from w)", 6) +
                      " select count(*) from w",
                  projection.name, group, after, before, step, projection.collection,
                  work_.change_source());
    *written += result[0][0].as<uint64_t>();
  });
}

}  // namespace denormd
