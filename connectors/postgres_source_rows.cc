#include "connectors/postgres_source_rows.h"

#include <algorithm>
#include <utility>

#include "connectors/postgres_reference_index.h"
#include "connectors/postgres_work.h"

namespace denormd {

namespace {

void WriteEntityRow(JsonWriter& e, const EntityRecord& record) {
  e.StartObject();
  e.Key("type");
  WriteJsonString(e, record.key.type);
  e.Key("id");
  WriteJsonString(e, record.key.id);
  e.Key("version");
  if (record.version) {
    e.Uint64(*record.version);
  } else {
    e.Null();
  }
  e.Key("deleted");
  e.Bool(record.deleted);
  e.Key("data");
  if (record.data) {
    record.data->Accept(e);
  } else {
    e.Null();
  }
  e.EndObject();
}

}  // namespace

namespace {

// The rows of PostgresSourceRows::LoadSql, by key.
Status EntityRows(const pqxx::result& rows, std::map<EntityKey, EntityRecord>* out) {
  for (const auto& row : rows) {
    EntityRecord record;
    record.key = {row[0].c_str(), row[1].c_str()};
    record.version = ParseVersion(row[2]);
    record.deleted = row[3].as<bool>();
    DENORMD_RETURN_IF_ERROR(ParseData(row[4], &record.data));
    EntityKey key = record.key;
    (*out)[std::move(key)] = std::move(record);
  }
  return Status::Ok();
}

void KeyArrays(const std::vector<EntityKey>& keys, std::string* types, std::string* ids) {
  std::vector<std::string> t, i;
  for (const EntityKey& key : keys) {
    t.push_back(key.type);
    i.push_back(key.id);
  }
  *types = PgTextArray(t);
  *ids = PgTextArray(i);
}

}  // namespace

std::string PostgresSourceRows::LoadSql() const {
  return "select e.type, e.id, e.version::text, e.deleted, e.data::text from " + work_.schema() +
         ".entities e join unnest($1::text[], $2::text[]) k(type, id)"
         " on e.type = k.type and e.id = k.id";
}

void PostgresSourceRows::ReadAhead(const std::vector<EntityKey>& keys) {
  std::vector<EntityKey> unwritten;
  for (const EntityKey& key : keys) {
    if (!written_.count(key)) unwritten.push_back(key);
  }
  const uint64_t stamp = work_.index_writes();
  std::vector<EntityKey> asked = read_.Ask(unwritten, stamp);
  if (asked.empty()) return;
  std::string types, ids;
  KeyArrays(asked, &types, &ids);
  work_.Defer({"loading entities ahead", "",
               [this, asked, stamp](const pqxx::result& rows) {
                 std::map<EntityKey, EntityRecord> found;
                 DENORMD_RETURN_IF_ERROR(EntityRows(rows, &found));
                 read_.Arrived(asked, stamp, std::move(found));
                 return Status::Ok();
               },
               nullptr, /*may_refuse=*/false},
              LoadSql(), types, ids);
}

// The records this transaction wrote are served from memory: their rows
// stay locked until it ends (the UPDATE's row lock), so they are what a
// read would return. Only the other keys are read, or answered from what
// was read ahead.
Status PostgresSourceRows::LoadEntities(const std::vector<EntityKey>& keys,
                                        std::vector<EntityRecord>* out) {
  std::vector<EntityKey> unwritten;
  for (const EntityKey& key : keys) {
    auto written = written_.find(key);
    if (written != written_.end()) {
      out->push_back(written->second);
      continue;
    }
    unwritten.push_back(key);
  }
  std::sort(unwritten.begin(), unwritten.end());
  unwritten.erase(std::unique(unwritten.begin(), unwritten.end()), unwritten.end());
  if (unwritten.empty()) return Status::Ok();
  const uint64_t stamp = work_.index_writes();
  bool kept = false;
  DENORMD_RETURN_IF_ERROR(read_.Answers(
      unwritten, stamp, [&] { return work_.SendDeferred("loading entities"); }, &kept));
  if (kept) {
    for (const EntityKey& key : unwritten) {
      if (const EntityRecord* record = read_.Find(key)) out->push_back(*record);
    }
    return Status::Ok();
  }
  std::string types, ids;
  KeyArrays(unwritten, &types, &ids);
  pqxx::result rows;
  DENORMD_RETURN_IF_ERROR(
      Guard("loading entities", [&] { rows = work_.Run(LoadSql(), types, ids); }));
  std::map<EntityKey, EntityRecord> found;
  DENORMD_RETURN_IF_ERROR(EntityRows(rows, &found));
  for (const auto& entry : found) out->push_back(entry.second);
  read_.Keep(unwritten, stamp, std::move(found));
  return Status::Ok();
}

Status PostgresSourceRows::WriteEntities(const std::vector<EntityWrite>& writes) {
  work_.IndexWritten();
  const std::string& schema = work_.schema();
  rapidjson::StringBuffer entities, added, removed;
  JsonWriter e(entities), a(added), r(removed);
  std::vector<std::string> replace_types, replace_ids;
  e.StartArray();
  a.StartArray();
  r.StartArray();
  for (const EntityWrite& write : writes) {
    const EntityRecord& record = write.record;
    WriteEntityRow(e, record);
    if (write.replace_all) {
      replace_types.push_back(record.key.type);
      replace_ids.push_back(record.key.id);
    }
    for (const ReferenceRow& row : write.added) WriteIndexRow(a, record.key, row);
    for (const ReferenceRow& row : write.removed) WriteIndexRow(r, record.key, row);
  }
  e.EndArray();
  a.EndArray();
  r.EndArray();
  // The source rows, the index rows each entity loses and gains, and the
  // per-target counts kept equal to the rows (+1 per row inserted, -1 per
  // row deleted, applied in key order so that concurrent writers cannot
  // deadlock on the counters): one statement. The rows removed and added
  // are disjoint, so the two sub-statements never touch one row.
  const std::string counts = CountDeltasSql(schema, work_.counted_rows());
  const std::string upsert =
      "e as (insert into " + schema + ".entities as t (type, id, version, deleted, data)"
      " select x.type, x.id, x.version, x.deleted, x.data from jsonb_to_recordset($1::jsonb)"
      " as x(type text, id text, version numeric, deleted boolean, data jsonb)"
      " on conflict (type, id) do update set version = excluded.version,"
      " deleted = excluded.deleted, data = excluded.data, updated_at = now())";
  auto insert = [&](const std::string& param) { return InsertIndexRowsSql(schema, param); };
  if (!replace_types.empty() && replace_types.size() != writes.size()) {
    return Status::Fatal("internal: entity writes that replace their index rows and writes that "
                         "change them cannot share a call");
  }
  // Deferred: the rows are served from written_ until the statement runs.
  const std::string what = "writing " + std::to_string(writes.size()) + " entities";
  const Status written = Guard(what, [&] {
    if (replace_types.empty()) {
      work_.Defer({what},
                  "with " + upsert + ", " + insert("$2") + ", " +
                      DeleteIndexRowsSql(schema, "$3") + "," + counts,
                  JsonText(entities), JsonText(added), JsonText(removed));
      return;
    }
    // Reindexing: every stored row of these entities goes first, then
    // their rows are inserted (two statements: one row may be in both).
    work_.Defer({what},
                "with " + upsert + ","
                " d as (delete from " + schema + ".refs r using unnest($2::text[], $3::text[]) k(type, id)"
                " where r.type = k.type and r.id = k.id returning r.type, r.field, r.target),"
                " i as (select null::text as type, null::text as field, null::text as target where false),"
                + counts,
                JsonText(entities), PgTextArray(replace_types), PgTextArray(replace_ids));
    work_.Defer({what},
                "with " + insert("$1") + ","
                " d as (select null::text as type, null::text as field, null::text as target where false),"
                + counts,
                JsonText(added));
  });
  if (written.ok()) {
    for (const EntityWrite& write : writes) written_[write.record.key] = write.record;
  }
  return written;
}

Status PostgresSourceRows::Journal(const std::vector<EntityChange>& changes) {
  if (changes.empty()) return Status::Ok();
  // Whether an apply is building is known once the writers' statement ran.
  bool applying = false;
  DENORMD_RETURN_IF_ERROR(work_.Applying(&applying));
  if (!applying) return Status::Ok();
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartArray();
  for (const EntityChange& change : changes) {
    w.StartObject();
    w.Key("type");
    WriteJsonString(w, change.key.type);
    w.Key("id");
    WriteJsonString(w, change.key.id);
    for (const auto& side : {std::make_pair("before", change.before),
                             std::make_pair("after", change.after)}) {
      w.Key(side.first);
      if (side.second != nullptr && side.second->has_value()) {
        WriteEntityRow(w, **side.second);
      } else {
        w.Null();
      }
    }
    w.EndObject();
  }
  w.EndArray();
  const std::string what = "journaling " + std::to_string(changes.size()) + " changes for apply";
  return Guard(what, [&] {
    work_.Defer({what}, "insert into " + work_.schema() + ".apply_journal (type, id, before, after)"
                " select x.type, x.id, x.before, x.after from jsonb_to_recordset($1::jsonb)"
                " as x(type text, id text, before jsonb, after jsonb)",
                JsonText(buffer));
  });
}

Status PostgresSourceRows::TakeJournal(size_t limit, std::vector<JournaledChange>* out) {
  out->clear();
  const std::string& schema = work_.schema();
  pqxx::result rows;
  DENORMD_RETURN_IF_ERROR(Guard("taking the apply journal", [&] {
    rows = work_.Run("with taken as (delete from " + schema + ".apply_journal where seq in"
                     " (select seq from " + schema + ".apply_journal order by seq"
                     " limit nullif($1::bigint, 0)) returning *)"
                     " select type, id, before is not null, before->>'version',"
                     " coalesce((before->>'deleted')::boolean, false), (before->'data')::text,"
                     " after is not null, after->>'version',"
                     " coalesce((after->>'deleted')::boolean, false), (after->'data')::text"
                     " from taken order by seq",
                     static_cast<int64_t>(limit));
  }));
  for (const auto& row : rows) {
    JournaledChange change;
    change.key = {row[0].c_str(), row[1].c_str()};
    for (int side = 0; side < 2; ++side) {
      const int at = 2 + side * 4;
      if (!row[at].as<bool>()) continue;
      EntityRecord record;
      record.key = change.key;
      record.version = ParseVersion(row[at + 1]);
      record.deleted = row[at + 2].as<bool>();
      JsonPtr data;
      if (!row[at + 3].is_null() && std::string(row[at + 3].c_str()) != "null") {
        DENORMD_RETURN_IF_ERROR(ParseData(row[at + 3], &data));
      }
      record.data = data;
      (side == 0 ? change.before : change.after) = std::move(record);
    }
    out->push_back(std::move(change));
  }
  return Status::Ok();
}

Status PostgresSourceRows::ListEntityIds(const std::string& type, const std::string& after,
                                         size_t limit, std::vector<std::string>* out) {
  return work_.ListStrings("listing entities",
                          "select id from " + work_.schema() +
                              ".entities where type = $1 and not deleted and id > $2"
                              " order by id limit $3",
                          type, after, limit, out);
}

}  // namespace denormd
