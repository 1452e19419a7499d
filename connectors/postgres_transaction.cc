#include "connectors/postgres_transaction.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <pqxx/pqxx>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "connectors/postgres_sql.h"

namespace denormd {

namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void WriteString(JsonWriter& w, const std::string& s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

std::string Text(const rapidjson::StringBuffer& buffer) {
  return std::string(buffer.GetString(), buffer.GetSize());
}

// The members "source", "partition" and "position" of a JSON row.
void WritePositionMembers(JsonWriter& w, const SourcePosition& at) {
  w.Key("source");
  WriteString(w, at.source);
  w.Key("partition");
  w.Int(at.partition);
  w.Key("position");
  w.Int64(at.position);
}

std::optional<uint64_t> ParseVersion(const pqxx::field& field) {
  if (field.is_null()) return std::nullopt;
  return std::strtoull(field.c_str(), nullptr, 10);
}

Status ParseData(const pqxx::field& field, JsonPtr* out) {
  if (field.is_null()) {
    out->reset();
    return Status::Ok();
  }
  return ParseJsonShared(field.c_str(), out);
}

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

class PostgresTransaction : public StoreTransaction,
                            public SourceRows,
                            public ReferenceIndex,
                            public DocumentTables,
                            public StreamLedger,
                            public WriteLocks {
 public:
  PostgresTransaction(pqxx::connection_base& connection, const std::string& schema,
                      LockRowProvisioner provision)
      : work_(connection), schema_(work_.quote_name(schema)), provision_(std::move(provision)) {}

  SourceRows& source() override { return *this; }
  ReferenceIndex& index() override { return *this; }
  DocumentTables& documents() override { return *this; }
  StreamLedger& ledger() override { return *this; }
  WriteLocks& locks() override { return *this; }

  Status Commit() override {
    return Guard("committing", [&] { work_.commit(); });
  }

  // Every statement of the engine is a keyed lookup or a range of one key, for
  // which an index nested loop is the right plan at any table size. Tables
  // that grow fast (a first load) have statistics minutes old, with which
  // the planner picks scans and hash joins that cost seconds; forbid those.
  void PinIndexPlans() {
    work_.exec("set local enable_seqscan = off; set local enable_hashjoin = off;"
               " set local enable_mergejoin = off");
  }

  // ---- WriteLocks

  Status LockWriters(bool exclusive) override {
    return Guard("joining the writers", [&] {
      work_.exec(std::string("lock table ") + schema_ + ".writers in " +
                 (exclusive ? "exclusive" : "share") + " mode");
    });
  }

  Status LockKeys(const std::vector<std::string>& keys, Mode mode) override {
    std::vector<int64_t> ids;
    for (const std::string& key : keys) ids.push_back(LockRowId(key));
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    if (ids.empty()) return Status::Ok();
    const std::string array = PgBigintArray(ids);
    // A key is a row of the locks table; its lock is a row lock, which
    // PostgreSQL keeps in the row itself, so a fan-out that locks 100,000
    // documents cannot exhaust the shared lock table. Missing rows are
    // created by a separate autocommit connection: inserting them here would
    // make this transaction wait for another one's uncommitted insert.
    const std::string sql = "select key from " + schema_ +
                            ".locks where key = any($1::bigint[]) order by key for update";
    const std::string what = "locking " + std::to_string(ids.size()) + " keys";
    if (mode == Mode::kWait) {
      // Waiting locks are taken in one statement, in key order, so that two
      // writers cannot deadlock: every row must exist first.
      DENORMD_RETURN_IF_ERROR(provision_(array));
      return Guard(what, [&] { work_.exec_params(sql, array); });
    }
    // Without waiting, order does not matter: lock the rows that exist (most
    // of them: the extra round trip is saved), then create and lock the rest.
    pqxx::result locked;
    DENORMD_RETURN_IF_ERROR(Guard(what, [&] { locked = work_.exec_params(sql + " nowait", array); }));
    if (locked.size() == ids.size()) return Status::Ok();
    std::set<int64_t> have;
    for (const auto& row : locked) have.insert(row[0].as<int64_t>());
    std::vector<int64_t> absent;
    for (int64_t id : ids) {
      if (!have.count(id)) absent.push_back(id);
    }
    const std::string missing = PgBigintArray(absent);
    DENORMD_RETURN_IF_ERROR(provision_(missing));
    return Guard(what, [&] { work_.exec_params(sql + " nowait", missing); });
  }

  // ---- SourceRows

  Status LoadEntities(const std::vector<EntityKey>& keys,
                      std::vector<EntityRecord>* out) override {
    if (keys.empty()) return Status::Ok();
    std::vector<std::string> types, ids;
    for (const EntityKey& key : keys) {
      types.push_back(key.type);
      ids.push_back(key.id);
    }
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard("loading entities", [&] {
      rows = work_.exec_params(
          "select e.type, e.id, e.version::text, e.deleted, e.data::text from " + schema_ +
              ".entities e join unnest($1::text[], $2::text[]) k(type, id)"
              " on e.type = k.type and e.id = k.id",
          PgTextArray(types), PgTextArray(ids));
    }));
    for (const auto& row : rows) {
      EntityRecord record;
      record.key = {row[0].c_str(), row[1].c_str()};
      record.version = ParseVersion(row[2]);
      record.deleted = row[3].as<bool>();
      DENORMD_RETURN_IF_ERROR(ParseData(row[4], &record.data));
      out->push_back(std::move(record));
    }
    return Status::Ok();
  }

  Status WriteEntities(const std::vector<EntityWrite>& writes) override {
    rapidjson::StringBuffer entities, references;
    JsonWriter e(entities), r(references);
    std::vector<std::string> types, ids;
    e.StartArray();
    r.StartArray();
    for (const EntityWrite& write : writes) {
      const EntityRecord& record = write.record;
      types.push_back(record.key.type);
      ids.push_back(record.key.id);
      WriteEntityRow(e, record);
      for (const ReferenceRow& row : write.references) {
        r.StartArray();
        WriteString(r, record.key.type);
        WriteString(r, row.relation->name());
        WriteString(r, row.target);
        WriteString(r, record.key.id);
        WriteString(r, HexEncode(row.sort));
        r.EndArray();
      }
    }
    e.EndArray();
    r.EndArray();
    return Guard("writing " + std::to_string(writes.size()) + " entities", [&] {
      work_.exec_params(
          "insert into " + schema_ + ".entities as t (type, id, version, deleted, data)"
          " select x.type, x.id, x.version, x.deleted, x.data from jsonb_to_recordset($1::jsonb)"
          " as x(type text, id text, version numeric, deleted boolean, data jsonb)"
          " on conflict (type, id) do update set version = excluded.version,"
          " deleted = excluded.deleted, data = excluded.data, updated_at = now()",
          Text(entities));
      ReplaceReferenceRows(types, ids, Text(references));
    });
  }

  Status ListEntityIds(const std::string& type, const std::string& after, size_t limit,
                       std::vector<std::string>* out) override {
    return ListStrings("listing entities",
                       "select id from " + schema_ +
                           ".entities where type = $1 and not deleted and id > $2"
                           " order by id limit $3",
                       type, after, limit, out);
  }

  // ---- ReferenceIndex

  Status Scan(const Relation& relation, const std::vector<IndexRange>& ranges, Read read,
              std::vector<Referrer>* out) override {
    if (ranges.empty()) return Status::Ok();
    const RangeArrays arrays(ranges);
    // Per range one index range scan in the range's direction.
    const std::string range = ".refs r where r.type = $1 and r.field = $2 and r.target = t.target"
                              " and (r.sort, r.id) ";
    const std::string bound = " (decode(t.sort, 'hex'), t.id collate \"C\")";
    const std::string scans =
        " from unnest($3::text[], $4::text[], $5::text[], $6::bool[], $7::bigint[])"
        " t(target, sort, id, backward, lim)"
        " cross join lateral ((select r.sort, r.id from " + schema_ + range + ">=" + bound +
        " and not t.backward order by r.sort, r.id limit t.lim)"
        " union all (select r.sort, r.id from " + schema_ + range + "<" + bound +
        " and t.backward order by r.sort desc, r.id desc limit t.lim)) x";
    const bool with_data = read == Read::kKeysAndData;
    const std::string sql =
        with_data ? "select t.target, encode(x.sort, 'hex'), e.id, e.version::text, e.data::text" +
                        scans + " join " + schema_ + ".entities e on e.type = $1 and e.id = x.id"
                  : "select t.target, encode(x.sort, 'hex'), x.id" + scans;
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard(with_data ? "loading referrers" : "finding referrers", [&] {
      rows = work_.exec_params(sql, relation.entity_type(), relation.name(), arrays.target,
                               arrays.sort, arrays.id, arrays.backward, arrays.limit);
    }));
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

  Status Count(const Relation& relation, const std::vector<IndexRange>& ranges,
               std::map<std::string, uint64_t>* out) override {
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
    pqxx::result rows;
    if (!whole.empty()) {
      DENORMD_RETURN_IF_ERROR(Guard("counting referrers", [&] {
        rows = work_.exec_params("select target, count from " + schema_ +
                                     ".ref_counts where type = $1 and field = $2 and"
                                     " target = any($3::text[]) and count > 0",
                                 relation.entity_type(), relation.name(), PgTextArray(whole));
      }));
      for (const auto& row : rows) (*out)[row[0].c_str()] = row[1].as<uint64_t>();
    }
    if (from.empty()) return Status::Ok();
    const RangeArrays arrays(from);
    DENORMD_RETURN_IF_ERROR(Guard("counting referrers", [&] {
      rows = work_.exec_params(
          "select b.target, (select count(*) from " + schema_ +
              ".refs r where r.type = $1 and r.field = $2 and r.target = b.target"
              " and (r.sort, r.id) >= (decode(b.sort, 'hex'), b.id collate \"C\"))"
              " from unnest($3::text[], $4::text[], $5::text[]) b(target, sort, id)",
          relation.entity_type(), relation.name(), arrays.target, arrays.sort, arrays.id);
    }));
    for (const auto& row : rows) (*out)[row[0].c_str()] = row[1].as<uint64_t>();
    return Status::Ok();
  }

  Status ListTargets(const Relation& relation, const std::string& after, size_t limit,
                     std::vector<std::string>* out) override {
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard("listing reference targets", [&] {
      rows = work_.exec_params("select distinct target from " + schema_ +
                                   ".refs where type = $1 and field = $2 and target > $3"
                                   " order by target limit $4",
                               relation.entity_type(), relation.name(), after,
                               static_cast<int64_t>(limit));
    }));
    for (const auto& row : rows) out->push_back(row[0].c_str());
    return Status::Ok();
  }

  // ---- DocumentTables

  Status Upsert(const ProjectionConfig& projection, const std::vector<DocumentRow>& rows,
                uint64_t* written) override {
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.StartArray();
    for (const DocumentRow& row : rows) {
      w.StartObject();
      w.Key("id");
      WriteString(w, row.id);
      w.Key("pk");
      if (row.pk) {
        WriteString(w, *row.pk);
      } else {
        w.Null();
      }
      w.Key("doc");
      w.RawValue(row.json.data(), row.json.size(), rapidjson::kObjectType);
      w.EndObject();
    }
    w.EndArray();
    return Guard("writing documents of " + projection.name, [&] {
      pqxx::result result = work_.exec_params(
          "insert into " + Table(projection) + " as c (id, doc, pk, projection)"
          " select x.id, x.doc, x.pk, $2 from jsonb_to_recordset($1::jsonb)"
          " as x(id text, doc jsonb, pk text)"
          " on conflict (id) do update set doc = excluded.doc, pk = excluded.pk,"
          " projection = excluded.projection"
          " where c.doc is distinct from excluded.doc or c.pk is distinct from excluded.pk"
          " or c.projection is distinct from excluded.projection",
          Text(buffer), projection.name);
      *written += result.affected_rows();
    });
  }

  Status Delete(const ProjectionConfig& projection, const std::vector<std::string>& ids,
                uint64_t* deleted) override {
    return Guard("deleting documents of " + projection.name, [&] {
      pqxx::result result = work_.exec_params(
          "delete from " + Table(projection) + " where projection = $1 and id = any($2::text[])",
          projection.name, PgTextArray(ids));
      *deleted += result.affected_rows();
    });
  }

  Status DeleteByPkExcept(const ProjectionConfig& projection, const std::vector<std::string>& pks,
                          const std::vector<std::string>& keep, uint64_t* deleted) override {
    return Guard("deleting documents of " + projection.name, [&] {
      pqxx::result result = work_.exec_params(
          "delete from " + Table(projection) +
              " where projection = $1 and pk = any($2::text[]) and id <> all($3::text[])",
          projection.name, PgTextArray(pks), PgTextArray(keep));
      *deleted += result.affected_rows();
    });
  }

  Status Load(const ProjectionConfig& projection, const std::vector<std::string>& ids,
              std::vector<DocumentRow>* out) override {
    return LoadDocumentsWhere(projection, "id", ids, out);
  }

  Status LoadByPk(const ProjectionConfig& projection, const std::vector<std::string>& pks,
                  std::vector<DocumentRow>* out) override {
    return LoadDocumentsWhere(projection, "pk", pks, out);
  }

  Status ListKeys(const ProjectionConfig& projection, bool by_pk, const std::string& after,
                  size_t limit, std::vector<std::string>* out) override {
    const std::string column = by_pk ? "pk" : "id";
    return ListStrings("listing documents of " + projection.name,
                       "select distinct " + column + " from " + Table(projection) +
                           " where projection = $1 and " + column + " > $2 order by " + column +
                           " limit $3",
                       projection.name, after, limit, out);
  }

  // ---- StreamLedger

  Status LoadPositions(const std::string& source, std::vector<StoredPosition>* out) override {
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard("loading positions", [&] {
      rows = work_.exec_params("select partition, position, applied, stale, dead from " + schema_ +
                                   ".positions where source = $1 order by partition",
                               source);
    }));
    for (const auto& row : rows) {
      StoredPosition position;
      position.at = {source, row[0].as<int32_t>(), row[1].as<int64_t>()};
      position.applied = row[2].as<uint64_t>();
      position.stale = row[3].as<uint64_t>();
      position.dead = row[4].as<uint64_t>();
      out->push_back(position);
    }
    return Status::Ok();
  }

  Status SavePositions(const std::vector<PositionUpdate>& updates) override {
    DENORMD_RETURN_IF_ERROR(CheckExpectedPositions(updates));
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.StartArray();
    for (const PositionUpdate& update : updates) {
      w.StartObject();
      WritePositionMembers(w, update.at);
      w.Key("applied");
      w.Uint64(update.applied);
      w.Key("stale");
      w.Uint64(update.stale);
      w.Key("dead");
      w.Uint64(update.dead);
      w.EndObject();
    }
    w.EndArray();
    return Guard("saving positions", [&] {
      work_.exec_params(
          "insert into " + schema_ +
              ".positions as p (source, partition, position, applied, stale, dead)"
              " select * from jsonb_to_recordset($1::jsonb) as x(source text, partition integer,"
              " position bigint, applied bigint, stale bigint, dead bigint)"
              " on conflict (source, partition) do update set position = excluded.position,"
              " applied = p.applied + excluded.applied, stale = p.stale + excluded.stale,"
              " dead = p.dead + excluded.dead, updated_at = now()",
          Text(buffer));
    });
  }

  Status AddDeadLetters(const std::vector<DeadLetter>& letters) override {
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.StartArray();
    for (const DeadLetter& letter : letters) {
      w.StartObject();
      WritePositionMembers(w, letter.at);
      w.Key("raw");
      WriteString(w, HexEncode(letter.raw));
      w.Key("reason");
      WriteString(w, letter.reason);
      w.EndObject();
    }
    w.EndArray();
    return Guard("writing dead letters", [&] {
      work_.exec_params(
          "insert into " + schema_ + ".dead_letters (source, partition, position, raw, reason)"
              " select x.source, x.partition, x.position, decode(x.raw, 'hex'), x.reason"
              " from jsonb_to_recordset($1::jsonb) as x(source text, partition integer,"
              " position bigint, raw text, reason text)",
          Text(buffer));
    });
  }

 private:
  std::string Table(const ProjectionConfig& projection) {
    return schema_ + "." + work_.quote_name(projection.collection);
  }

  static void WriteEntityRow(JsonWriter& e, const EntityRecord& record) {
    e.StartObject();
    e.Key("type");
    WriteString(e, record.key.type);
    e.Key("id");
    WriteString(e, record.key.id);
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

  // Replaces the entities' index rows, and keeps ref_counts (children per
  // target) equal to the rows: +1 per row inserted, -1 per row deleted.
  // Runs inside a Guard.
  void ReplaceReferenceRows(const std::vector<std::string>& types,
                            const std::vector<std::string>& ids, const std::string& rows_json) {
    std::map<std::tuple<std::string, std::string, std::string>, int64_t> delta;
    for (const auto& row : work_.exec_params(
             "delete from " + schema_ +
                 ".refs r using unnest($1::text[], $2::text[]) k(type, id)"
                 " where r.type = k.type and r.id = k.id returning r.type, r.field, r.target",
             PgTextArray(types), PgTextArray(ids))) {
      delta[{row[0].c_str(), row[1].c_str(), row[2].c_str()}]--;
    }
    for (const auto& row : work_.exec_params(
             "insert into " + schema_ + ".refs (type, field, target, id, sort)"
             " select x->>0, x->>1, x->>2, x->>3, decode(x->>4, 'hex')"
             " from jsonb_array_elements($1::jsonb) x on conflict do nothing"
             " returning type, field, target",
             rows_json)) {
      delta[{row[0].c_str(), row[1].c_str(), row[2].c_str()}]++;
    }
    rapidjson::StringBuffer counts;
    JsonWriter c(counts);
    c.StartArray();
    for (const auto& entry : delta) {  // sorted: concurrent updates cannot deadlock
      if (entry.second == 0) continue;
      c.StartArray();
      WriteString(c, std::get<0>(entry.first));
      WriteString(c, std::get<1>(entry.first));
      WriteString(c, std::get<2>(entry.first));
      c.Int64(entry.second);
      c.EndArray();
    }
    c.EndArray();
    work_.exec_params(
        "insert into " + schema_ + ".ref_counts as c (type, field, target, count)"
        " select x->>0, x->>1, x->>2, (x->>3)::bigint from jsonb_array_elements($1::jsonb) x"
        " order by 1, 2, 3"
        " on conflict (type, field, target) do update set count = c.count + excluded.count",
        Text(counts));
  }

  // Locks the stored positions of the fenced streams and compares them with
  // what the batch started from. The row lock makes a second committer of
  // the same stream wait and then see the first one's position.
  Status CheckExpectedPositions(const std::vector<PositionUpdate>& updates) {
    std::vector<std::string> sources, partitions;
    for (const PositionUpdate& update : updates) {
      if (!update.expected_previous) continue;
      sources.push_back(update.at.source);
      partitions.push_back(std::to_string(update.at.partition));
    }
    if (sources.empty()) return Status::Ok();
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard("checking positions", [&] {
      rows = work_.exec_params("select p.source, p.partition, p.position from " + schema_ +
                                   ".positions p join unnest($1::text[], $2::int[]) k(source, "
                                   "partition) on p.source = k.source and p.partition = "
                                   "k.partition order by 1, 2 for update of p",
                               PgTextArray(sources), PgTextArray(partitions));
    }));
    std::map<std::pair<std::string, int32_t>, int64_t> stored;
    for (const auto& row : rows) {
      stored[{row[0].c_str(), row[1].as<int32_t>()}] = row[2].as<int64_t>();
    }
    for (const PositionUpdate& update : updates) {
      if (!update.expected_previous) continue;
      auto it = stored.find({update.at.source, update.at.partition});
      int64_t position = it == stored.end() ? -1 : it->second;
      if (position != *update.expected_previous) {
        return Status::Conflict(update.at.source + " partition " +
                                std::to_string(update.at.partition) + " is at " +
                                std::to_string(position) + ", this batch expected " +
                                std::to_string(*update.expected_previous) +
                                ": another consumer applied these events");
      }
    }
    return Status::Ok();
  }

  Status ListStrings(const std::string& what, const std::string& sql, const std::string& a,
                     const std::string& after, size_t limit, std::vector<std::string>* out) {
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard(what, [&] {
      rows = work_.exec_params(sql, a, after, static_cast<int64_t>(limit));
    }));
    for (const auto& row : rows) out->push_back(row[0].c_str());
    return Status::Ok();
  }

  Status LoadDocumentsWhere(const ProjectionConfig& projection, const std::string& column,
                            const std::vector<std::string>& values,
                            std::vector<DocumentRow>* out) {
    if (values.empty()) return Status::Ok();
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard("loading documents of " + projection.name, [&] {
      rows = work_.exec_params("select id, pk, doc::text from " + Table(projection) +
                                   " where projection = $1 and " + column +
                                   " = any($2::text[])",
                               projection.name, PgTextArray(values));
    }));
    for (const auto& row : rows) {
      DocumentRow doc;
      doc.id = row[0].c_str();
      if (!row[1].is_null()) doc.pk = row[1].c_str();
      doc.json = row[2].c_str();
      out->push_back(std::move(doc));
    }
    return Status::Ok();
  }

  pqxx::work work_;
  std::string schema_;
  LockRowProvisioner provision_;
};

}  // namespace

Status BeginPostgresTransaction(pqxx::connection_base& connection, const std::string& schema,
                                LockRowProvisioner provision,
                                std::unique_ptr<StoreTransaction>* out) {
  return Guard("starting a transaction", [&] {
    auto txn = std::make_unique<PostgresTransaction>(connection, schema, std::move(provision));
    txn->PinIndexPlans();
    *out = std::move(txn);
  });
}

}  // namespace denormd
