#include "connectors/postgres_stream_ledger.h"

#include <utility>

#include "connectors/postgres_work.h"
#include "projections/fanout_json.h"

namespace denormd {

namespace {

// The members "source", "partition" and "position" of a JSON row.
void WritePositionMembers(JsonWriter& w, const SourcePosition& at) {
  WriteMember(w, "source", at.source);
  w.Key("partition");
  w.Int(at.partition);
  w.Key("position");
  w.Int64(at.position);
}

// The members of a position row: its stream's, and "lane".
void WritePositionMembers(JsonWriter& w, const SourcePosition& at, const LaneKey& lane) {
  WritePositionMembers(w, at);
  w.Key("lane");
  w.StartArray();
  for (const std::string& type : lane) w.String(type.data(), type.size());
  w.EndArray();
}

}  // namespace

Status PostgresStreamLedger::LoadPositions(const std::string& source,
                                           std::vector<StoredPosition>* out) {
  pqxx::result rows;
  DENORMD_RETURN_IF_ERROR(Guard("loading positions", [&] {
    rows = work_.Run("select partition, position, applied, stale, dead, array_to_json(lane)::text"
                         " from " + work_.schema() +
                         ".positions where source = $1 order by partition, lane",
                     source);
  }));
  for (const auto& row : rows) {
    StoredPosition position;
    position.at = {source, row[0].as<int32_t>(), row[1].as<int64_t>()};
    position.applied = row[2].as<uint64_t>();
    position.stale = row[3].as<uint64_t>();
    position.dead = row[4].as<uint64_t>();
    DENORMD_RETURN_IF_ERROR(TextArrayFromJson(row[5].c_str(), &position.lane));
    out->push_back(position);
  }
  return Status::Ok();
}

// One statement, deferred (it goes with COMMIT): existing streams are
// advanced, new streams inserted. A fenced stream whose stored position is
// not the one the batch expected (or that another inserter created first)
// is given a NULL position, which the column's NOT NULL refuses: the
// statement fails, and the transaction with it, before COMMIT runs; that
// failure is the Conflict. The UPDATE's row lock makes a second committer
// of a stream wait and then compare with the first one's position (READ
// COMMITTED evaluates the new value again on the row it waited for); an
// insert that meets a row committed meanwhile becomes that update.
Status PostgresStreamLedger::SavePositions(const std::vector<PositionUpdate>& updates) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartArray();
  for (const PositionUpdate& update : updates) {
    w.StartObject();
    WritePositionMembers(w, update.at, update.lane);
    WriteMember(w, "applied", update.applied);
    WriteMember(w, "stale", update.stale);
    WriteMember(w, "dead", update.dead);
    w.Key("fenced");
    w.Bool(update.expected_previous.has_value());
    w.Key("expected");
    w.Int64(update.expected_previous.value_or(-1));
    w.EndObject();
  }
  w.EndArray();
  const std::string table = work_.schema() + ".positions";
  // What a Conflict names: the fenced streams and where the batch expected them.
  std::string fenced;
  for (const PositionUpdate& update : updates) {
    if (!update.expected_previous) continue;
    fenced += (fenced.empty() ? "" : " or ") + update.at.source + " partition " +
              std::to_string(update.at.partition) +
              (update.lane.empty() ? "" : " lane " + LaneText(update.lane)) + " (expected at " +
              std::to_string(*update.expected_previous) + ")";
  }
  const std::string what = "saving positions";
  return Guard(what, [&] {
    work_.Defer(
        {what, "", nullptr,
         [what, fenced](const std::exception& e) {
           const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e);
           if (sql != nullptr && sql->sqlstate() == "23502") {
             return Status::Conflict(fenced + " is not at the position this batch expected:"
                                     " another consumer applied these events");
           }
           return FromPostgresException(e, what);
         }},
        "with x as (select * from jsonb_to_recordset($1::jsonb) as x(source text,"
            " partition integer, lane text[], position bigint, applied bigint, stale bigint,"
            " dead bigint, fenced boolean, expected bigint)),"
            " u as (update " + table + " p set position = case when not x.fenced"
            " or p.position = x.expected then x.position end,"
            " applied = p.applied + x.applied, stale = p.stale + x.stale, dead = p.dead + x.dead,"
            " updated_at = now() from x where p.source = x.source and p.partition = x.partition"
            " and p.lane = x.lane returning p.source, p.partition, p.lane),"
            // A fenced new stream: created meanwhile by another consumer is the Conflict.
            " f as (insert into " + table +
            " (source, partition, lane, position, applied, stale, dead)"
            " select source, partition, lane, case when x.expected = -1 then position end,"
            " applied, stale, dead from x where x.fenced and not exists (select 1 from u"
            " where u.source = x.source and u.partition = x.partition and u.lane = x.lane)"
            " on conflict (source, partition, lane) do update set position = null)"
            " insert into " + table +
            " as p (source, partition, lane, position, applied, stale, dead)"
            " select source, partition, lane, position, applied, stale, dead from x"
            " where not x.fenced and not exists (select 1 from u where u.source = x.source"
            " and u.partition = x.partition and u.lane = x.lane)"
            " on conflict (source, partition, lane) do update set position = excluded.position,"
            " applied = p.applied + excluded.applied, stale = p.stale + excluded.stale,"
            " dead = p.dead + excluded.dead, updated_at = now()",
        JsonText(buffer));
  });
}

Status PostgresStreamLedger::AddPositionRows(const std::vector<StoredPosition>& rows) {
  if (rows.empty()) return Status::Ok();
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartArray();
  for (const StoredPosition& row : rows) {
    w.StartObject();
    WritePositionMembers(w, row.at, row.lane);
    w.EndObject();
  }
  w.EndArray();
  return Guard("adding the lanes' position rows", [&] {
    work_.Run("insert into " + work_.schema() +
                  ".positions (source, partition, lane, position)"
                  " select source, partition, lane, position from jsonb_to_recordset($1::jsonb)"
                  " as x(source text, partition integer, lane text[], position bigint)"
                  " on conflict (source, partition, lane) do nothing",
              JsonText(buffer));
  });
}

Status PostgresStreamLedger::RecordFanOuts(const std::vector<FanOutStat>& stats) {
  if (stats.empty()) return Status::Ok();
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartArray();
  for (const FanOutStat& stat : stats) {
    w.StartObject();
    WriteFanOutStatMembers(w, stat);
    w.EndObject();
  }
  w.EndArray();
  return Guard("recording fan-out statistics", [&] {
    // Kept a week: the hours older go as the next hour's first rows come.
    const std::string table = work_.schema() + ".fanout_stats";
    work_.Run("with old as (delete from " + table + " where hour < now() -"
              " interval '7 days') insert into " + table + " as f (hour, type, field, changes,"
              " documents, max_documents, max_id) select date_trunc('hour', now()), x.type,"
              " x.field, x.changes, x.documents, x.max_documents, x.max_id"
              " from jsonb_to_recordset($1::jsonb)"
              " as x(type text, field text, changes bigint, documents bigint, max_documents bigint,"
              " max_id text) on conflict (hour, type, field) do update set"
              " changes = f.changes + excluded.changes, documents = f.documents + excluded.documents,"
              " max_documents = greatest(f.max_documents, excluded.max_documents),"
              " max_id = case when excluded.max_documents > f.max_documents then excluded.max_id"
              " else f.max_id end",
              JsonText(buffer));
  });
}

Status PostgresStreamLedger::ReadFanOuts(uint64_t within_seconds, std::vector<FanOutStat>* out) {
  out->clear();
  return Guard("reading fan-out statistics", [&] {
    pqxx::result rows = work_.Run(
        "select type, field, changes, documents, max_documents, max_id,"
        " extract(epoch from hour)::bigint from " + work_.schema() + ".fanout_stats"
        " where hour > now() - make_interval(secs => $1) order by hour desc, type, field",
        static_cast<int64_t>(within_seconds));
    for (const pqxx::row& row : rows) {
      FanOutStat stat;
      stat.type = row[0].c_str();
      stat.field = row[1].c_str();
      stat.changes = row[2].as<uint64_t>();
      stat.documents = row[3].as<uint64_t>();
      stat.max_documents = row[4].as<uint64_t>();
      stat.max_id = row[5].c_str();
      stat.hour = row[6].as<int64_t>();
      out->push_back(std::move(stat));
    }
  });
}

Status PostgresStreamLedger::AddDeadLetters(const std::vector<DeadLetter>& letters) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartArray();
  for (const DeadLetter& letter : letters) {
    w.StartObject();
    WritePositionMembers(w, letter.at);
    WriteMember(w, "raw", HexEncode(letter.raw));
    WriteMember(w, "reason", letter.reason);
    w.EndObject();
  }
  w.EndArray();
  return Guard("writing dead letters", [&] {
    work_.Defer({"writing dead letters"},
                "insert into " + work_.schema() +
                    ".dead_letters (source, partition, position, raw, reason)"
                    " select x.source, x.partition, x.position, decode(x.raw, 'hex'), x.reason"
                    " from jsonb_to_recordset($1::jsonb) as x(source text, partition integer,"
                    " position bigint, raw text, reason text)",
                JsonText(buffer));
  });
}

}  // namespace denormd
