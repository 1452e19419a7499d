#include "connectors/postgres_store.h"

#include "projections/projection_plan.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <set>
#include <tuple>

#include <pqxx/pqxx>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace denormd {

namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// A PostgreSQL bigint[] literal: {1,-2,3}.
std::string PgBigintArray(const std::vector<int64_t>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(values[i]);
  }
  out += '}';
  return out;
}

// Converts a libpqxx exception into a Status that says what a retry would do.
Status FromException(const std::exception& e, const std::string& what) {
  std::string message = what + ": " + e.what();
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  if (dynamic_cast<const pqxx::in_doubt_error*>(&e) != nullptr) {
    return Status::Transient("commit outcome unknown (connection lost during commit): " + message);
  }
  if (dynamic_cast<const pqxx::broken_connection*>(&e) != nullptr) {
    return Status::Transient(message);
  }
  // Deadlock, serialization failure: the transaction was rolled back.
  if (dynamic_cast<const pqxx::transaction_rollback*>(&e) != nullptr) {
    return Status::Transient(message);
  }
  if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e)) {
    const std::string state = sql->sqlstate();
    // 40xxx: serialization failure, deadlock; 08xxx: connection; 57P0x:
    // server shutting down or starting; 53xxx: out of resources.
    if (state == "55P03") return Status::Busy(message);  // lock_not_available (NOWAIT)
    if (state.rfind("40", 0) == 0 || state.rfind("08", 0) == 0 || state.rfind("57P", 0) == 0 ||
        state.rfind("53", 0) == 0) {
      return Status::Transient(message + " (SQLSTATE " + state + ")");
    }
    return Status::Fatal(message + (state.empty() ? "" : " (SQLSTATE " + state + ")"));
  }
  return Status::Fatal(message);
}

template <typename F>
Status Guard(const std::string& what, F&& body) {
  try {
    body();
    return Status::Ok();
  } catch (const std::exception& e) {
    return FromException(e, what);
  }
}

void WriteString(JsonWriter& w, const std::string& s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
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

std::string HexEncode(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string HexDecode(const char* hex) {
  auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  std::string out;
  for (size_t i = 0; hex[i] != '\0' && hex[i + 1] != '\0'; i += 2) {
    out.push_back(static_cast<char>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
  }
  return out;
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

class PostgresTransaction : public StoreTransaction {
 public:
  // `provision` creates lock rows (in its own committed transaction).
  PostgresTransaction(pqxx::connection& connection, const std::string& schema,
                      std::function<Status(const std::string& key_array)> provision)
      : work_(connection), schema_(work_.quote_name(schema)), provision_(std::move(provision)) {}

  // Every statement of the engine is a keyed lookup or a range of one key, for
  // which an index nested loop is the right plan at any table size. Tables
  // that grow fast (a first load) have statistics minutes old, with which
  // the planner picks scans and hash joins that cost seconds; forbid those.
  void PinIndexPlans() {
    work_.exec("set local enable_seqscan = off; set local enable_hashjoin = off;"
               " set local enable_mergejoin = off");
  }

  Status LockWriters(bool exclusive) override {
    return Guard("joining the writers", [&] {
      work_.exec(std::string("lock table ") + schema_ + ".writers in " +
                 (exclusive ? "exclusive" : "share") + " mode");
    });
  }

  Status LockKeys(const std::vector<std::string>& keys, LockMode mode) override {
    std::vector<int64_t> ids;
    for (const std::string& key : keys) ids.push_back(AdvisoryLockId(key));
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
    if (mode == LockMode::kWait) {
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
      for (const ReferenceRow& row : write.references) {
        r.StartArray();
        WriteString(r, record.key.type);
        WriteString(r, row.relation);
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
          std::string(entities.GetString(), entities.GetSize()));
      // Replace the entities' index rows, and keep ref_counts (children per
      // target) equal to the rows: +1 per row inserted, -1 per row deleted.
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
               std::string(references.GetString(), references.GetSize()))) {
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
          std::string(counts.GetString(), counts.GetSize()));
    });
  }

  Status FindReferrers(const std::string& type, const std::string& relation,
                       const std::vector<std::string>& targets,
                       std::vector<Referrer>* out) override {
    if (targets.empty()) return Status::Ok();
    return ReadReferrerRows("finding referrers",
                            "select target, encode(sort, 'hex'), id from " + schema_ +
                                ".refs where type = $1 and field = $2 and"
                                " target = any($3::text[])",
                            type, false, out, relation, PgTextArray(targets));
  }

  Status LoadReferrers(const std::string& type, const std::string& relation,
                       const std::vector<std::string>& targets,
                       std::vector<Referrer>* out) override {
    if (targets.empty()) return Status::Ok();
    return ReadReferrerRows(
        "loading referrers",
        "select r.target, encode(r.sort, 'hex'), e.id, e.version::text, e.data::text from " +
            schema_ + ".refs r join " + schema_ +
            ".entities e on e.type = r.type and e.id = r.id"
            " where r.type = $1 and r.field = $2 and r.target = any($3::text[])",
        type, true, out, relation, PgTextArray(targets));
  }

  Status CountReferrers(const std::string& type, const std::string& relation,
                        const std::vector<std::string>& targets,
                        std::map<std::string, uint64_t>* out) override {
    if (targets.empty()) return Status::Ok();
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard("counting referrers", [&] {
      rows = work_.exec_params("select target, count from " + schema_ +
                                   ".ref_counts where type = $1 and field = $2 and"
                                   " target = any($3::text[]) and count > 0",
                               type, relation, PgTextArray(targets));
    }));
    for (const auto& row : rows) (*out)[row[0].c_str()] = row[1].as<uint64_t>();
    return Status::Ok();
  }

  Status LoadFirstReferrers(const std::string& type, const std::string& relation,
                            const std::vector<std::string>& targets, uint64_t limit,
                            std::vector<Referrer>* out) override {
    if (targets.empty()) return Status::Ok();
    // Per target, an index scan of refs in (sort, id) order that stops after
    // `limit` rows: a post with a million comments costs three index reads.
    return ReadReferrerRows(
        "loading first referrers",
        "select t.target, encode(x.sort, 'hex'), e.id, e.version::text, e.data::text"
        " from unnest($3::text[]) t(target) cross join lateral (select r.sort, r.id from " +
            schema_ +
            ".refs r where r.type = $1 and r.field = $2 and r.target = t.target"
            " order by r.sort, r.id limit $4) x join " +
            schema_ + ".entities e on e.type = $1 and e.id = x.id",
        type, true, out, relation, PgTextArray(targets), static_cast<int64_t>(limit));
  }

  Status CountReferrersFrom(const std::string& type, const std::string& relation,
                            const std::map<std::string, ReferrerBound>& bounds,
                            std::map<std::string, uint64_t>* out) override {
    if (bounds.empty()) return Status::Ok();
    std::vector<std::string> targets, sorts, ids, unused;
    BoundArrays(bounds, &targets, &sorts, &ids, &unused);
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard("counting referrers", [&] {
      rows = work_.exec_params(
          "select b.target, (select count(*) from " + schema_ +
              ".refs r where r.type = $1 and r.field = $2 and r.target = b.target"
              " and (r.sort, r.id) >= (decode(b.sort, 'hex'), b.id collate \"C\"))"
              " from unnest($3::text[], $4::text[], $5::text[]) b(target, sort, id)",
          type, relation, PgTextArray(targets), PgTextArray(sorts), PgTextArray(ids));
    }));
    for (const auto& row : rows) (*out)[row[0].c_str()] = row[1].as<uint64_t>();
    return Status::Ok();
  }

  Status LoadReferrersAround(const std::string& type, const std::string& relation,
                             const std::map<std::string, ReferrerBound>& bounds, uint64_t limit,
                             std::vector<Referrer>* out) override {
    if (bounds.empty()) return Status::Ok();
    return ReadReferrersAround(type, relation, bounds, limit, true, out);
  }

  Status FindReferrersAround(const std::string& type, const std::string& relation,
                             const std::map<std::string, ReferrerBound>& bounds, uint64_t limit,
                             std::vector<Referrer>* out) override {
    if (bounds.empty()) return Status::Ok();
    return ReadReferrersAround(type, relation, bounds, limit, false, out);
  }

  Status ReadReferrersAround(const std::string& type, const std::string& relation,
                             const std::map<std::string, ReferrerBound>& bounds, uint64_t limit,
                             bool with_data, std::vector<Referrer>* out) {
    std::vector<std::string> targets, sorts, ids, befores;
    BoundArrays(bounds, &targets, &sorts, &ids, &befores);
    // Two index range scans per group: backwards from the bound for the
    // members that share its first bucket, forwards from it for the rest.
    const std::string range = ".refs r where r.type = $1 and r.field = $2 and r.target = t.target"
                              " and (r.sort, r.id) ";
    const std::string bound = " (decode(t.sort, 'hex'), t.id collate \"C\")";
    const std::string around =
        " from unnest($3::text[], $4::text[], $5::text[], $6::bigint[]) t(target, sort, id, back)"
        " cross join lateral ((select r.sort, r.id from " +
        schema_ + range + "<" + bound + " order by r.sort desc, r.id desc limit t.back)"
        " union all (select r.sort, r.id from " + schema_ + range + ">=" + bound +
        " order by r.sort, r.id limit $7)) x";
    const int64_t max_rows = static_cast<int64_t>(limit == 0 ? INT64_MAX : limit);
    const std::string sql =
        with_data ? "select t.target, encode(x.sort, 'hex'), e.id, e.version::text, e.data::text" +
                        around + " join " + schema_ + ".entities e on e.type = $1 and e.id = x.id"
                  : "select t.target, encode(x.sort, 'hex'), x.id" + around;
    return ReadReferrerRows(with_data ? "loading referrers" : "finding referrers", sql, type,
                            with_data, out, relation, PgTextArray(targets), PgTextArray(sorts),
                            PgTextArray(ids), PgTextArray(befores), max_rows);
  }

  static void BoundArrays(const std::map<std::string, ReferrerBound>& bounds,
                          std::vector<std::string>* targets, std::vector<std::string>* sorts,
                          std::vector<std::string>* ids, std::vector<std::string>* befores) {
    for (const auto& bound : bounds) {
      targets->push_back(bound.first);
      sorts->push_back(HexEncode(bound.second.sort));
      ids->push_back(bound.second.id);
      befores->push_back(std::to_string(bound.second.before));
    }
  }

  Status ListEntityIds(const std::string& type, const std::string& after, size_t limit,
                       std::vector<std::string>* out) override {
    return ListStrings("listing entities",
                       "select id from " + schema_ +
                           ".entities where type = $1 and not deleted and id > $2"
                           " order by id limit $3",
                       type, after, limit, out);
  }

  Status ListReferenceTargets(const std::string& type, const std::string& relation,
                              const std::string& after, size_t limit,
                              std::vector<std::string>* out) override {
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard("listing reference targets", [&] {
      rows = work_.exec_params("select distinct target from " + schema_ +
                                   ".refs where type = $1 and field = $2 and target > $3"
                                   " order by target limit $4",
                               type, relation, after, static_cast<int64_t>(limit));
    }));
    for (const auto& row : rows) out->push_back(row[0].c_str());
    return Status::Ok();
  }

  Status UpsertDocuments(const std::string& collection, const std::string& projection,
                         const std::vector<DocumentRow>& rows, uint64_t* written) override {
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
    const std::string table = schema_ + "." + work_.quote_name(collection);
    return Guard("writing documents of " + projection, [&] {
      pqxx::result result = work_.exec_params(
          "insert into " + table + " as c (id, doc, pk, projection)"
          " select x.id, x.doc, x.pk, $2 from jsonb_to_recordset($1::jsonb)"
          " as x(id text, doc jsonb, pk text)"
          " on conflict (id) do update set doc = excluded.doc, pk = excluded.pk,"
          " projection = excluded.projection"
          " where c.doc is distinct from excluded.doc or c.pk is distinct from excluded.pk"
          " or c.projection is distinct from excluded.projection",
          std::string(buffer.GetString(), buffer.GetSize()), projection);
      *written += result.affected_rows();
    });
  }

  Status DeleteDocuments(const std::string& collection, const std::string& projection,
                         const std::vector<std::string>& ids, uint64_t* deleted) override {
    const std::string table = schema_ + "." + work_.quote_name(collection);
    return Guard("deleting documents of " + projection, [&] {
      pqxx::result result = work_.exec_params(
          "delete from " + table + " where projection = $1 and id = any($2::text[])", projection,
          PgTextArray(ids));
      *deleted += result.affected_rows();
    });
  }

  Status DeleteDocumentsExcept(const std::string& collection, const std::string& projection,
                               const std::vector<std::string>& pks,
                               const std::vector<std::string>& keep,
                               uint64_t* deleted) override {
    const std::string table = schema_ + "." + work_.quote_name(collection);
    return Guard("deleting documents of " + projection, [&] {
      pqxx::result result = work_.exec_params(
          "delete from " + table +
              " where projection = $1 and pk = any($2::text[]) and id <> all($3::text[])",
          projection, PgTextArray(pks), PgTextArray(keep));
      *deleted += result.affected_rows();
    });
  }

  Status LoadDocuments(const std::string& collection, const std::string& projection,
                       const std::vector<std::string>& ids,
                       std::vector<DocumentRow>* out) override {
    return LoadDocumentsWhere(collection, projection, "id", ids, out);
  }

  Status LoadDocumentsByPk(const std::string& collection, const std::string& projection,
                           const std::vector<std::string>& pks,
                           std::vector<DocumentRow>* out) override {
    return LoadDocumentsWhere(collection, projection, "pk", pks, out);
  }

  Status ListDocumentKeys(const std::string& collection, const std::string& projection,
                          bool by_pk, const std::string& after, size_t limit,
                          std::vector<std::string>* out) override {
    const std::string table = schema_ + "." + work_.quote_name(collection);
    const std::string column = by_pk ? "pk" : "id";
    return ListStrings("listing documents of " + projection,
                       "select distinct " + column + " from " + table +
                           " where projection = $1 and " + column + " > $2 order by " + column +
                           " limit $3",
                       projection, after, limit, out);
  }

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
          std::string(buffer.GetString(), buffer.GetSize()));
    });
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
          std::string(buffer.GetString(), buffer.GetSize()));
    });
  }

  Status Commit() override {
    return Guard("committing", [&] { work_.commit(); });
  }

 private:
  Status ListStrings(const std::string& what, const std::string& sql, const std::string& a,
                     const std::string& after, size_t limit, std::vector<std::string>* out) {
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard(what, [&] {
      rows = work_.exec_params(sql, a, after, static_cast<int64_t>(limit));
    }));
    for (const auto& row : rows) out->push_back(row[0].c_str());
    return Status::Ok();
  }

  // Runs a query returning (target, sort hex, id) rows, followed by
  // (version, data) when `with_data`; without, entity.data stays null.
  template <typename... Args>
  Status ReadReferrerRows(const std::string& what, const std::string& sql, const std::string& type,
                          bool with_data, std::vector<Referrer>* out, Args&&... args) {
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard(what, [&] {
      rows = work_.exec_params(sql, type, std::forward<Args>(args)...);
    }));
    for (const auto& row : rows) {
      Referrer referrer;
      referrer.target = row[0].c_str();
      referrer.sort = HexDecode(row[1].c_str());
      referrer.entity.key = {type, row[2].c_str()};
      if (with_data) {
        referrer.entity.version = ParseVersion(row[3]);
        DENORMD_RETURN_IF_ERROR(ParseData(row[4], &referrer.entity.data));
      }
      out->push_back(std::move(referrer));
    }
    return Status::Ok();
  }

  Status LoadDocumentsWhere(const std::string& collection, const std::string& projection,
                            const std::string& column, const std::vector<std::string>& values,
                            std::vector<DocumentRow>* out) {
    if (values.empty()) return Status::Ok();
    const std::string table = schema_ + "." + work_.quote_name(collection);
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard("loading documents of " + projection, [&] {
      rows = work_.exec_params("select id, pk, doc::text from " + table +
                                   " where projection = $1 and " + column +
                                   " = any($2::text[])",
                               projection, PgTextArray(values));
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
  std::function<Status(const std::string&)> provision_;
};

}  // namespace

int64_t AdvisoryLockId(const std::string& key) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : key) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return static_cast<int64_t>(hash);
}

std::string PgTextArray(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += '"';
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

std::string PostgresConnectionString(const Config& config) {
  const char* env = std::getenv("DENORMD_POSTGRES");
  if (env != nullptr && *env != '\0') return env;
  return config.store.postgres;
}

struct PostgresStore::Connection {
  explicit Connection(const std::string& options) : pq(options) {
    // Documents and entity data larger than ~2 kB are compressed in TOAST.
    // lz4 (PostgreSQL 14+, when built with it) compresses about twice as fast
    // as the default pglz: a bucket rewrite of 237 documents of 100 comments
    // took 31 ms instead of 70 ms. Values already stored keep their method.
    pqxx::nontransaction work(pq);
    work.exec("select set_config('default_toast_compression', 'lz4', false) from pg_settings"
              " where name = 'default_toast_compression' and 'lz4' = any(enumvals)");
  }
  pqxx::connection pq;
};

PostgresStore::PostgresStore(const Config& config, std::string connection_string)
    : config_(config), connection_string_(std::move(connection_string)) {}

PostgresStore::~PostgresStore() = default;

Status PostgresStore::Connect() {
  if (connection_ && connection_->pq.is_open()) return Status::Ok();
  connection_.reset();
  return Guard("connecting to PostgreSQL", [&] {
    connection_ = std::make_unique<Connection>(connection_string_);
  });
}

Status PostgresStore::Open(bool allow_stale_index) {
  DENORMD_RETURN_IF_ERROR(CreateTables());
  const std::string fingerprint = ProjectionPlan(config_).IndexFingerprint();
  std::optional<std::string> stored;
  bool has_entities = false;
  DENORMD_RETURN_IF_ERROR(Guard("checking the reference index", [&] {
    pqxx::work work(connection_->pq);
    const std::string s = work.quote_name(config_.store.schema);
    pqxx::result rows = work.exec("select value from " + s + ".meta where key = 'index'");
    if (!rows.empty()) stored = rows[0][0].c_str();
    has_entities = work.exec1("select exists (select 1 from " + s + ".entities)")[0].as<bool>();
    if (!stored && !has_entities) {
      // A new store: the index is built as events arrive.
      work.exec_params("insert into " + s + ".meta (key, value) values ('index', $1)"
                       " on conflict (key) do nothing", fingerprint);
      stored = fingerprint;
    }
    work.commit();
  }));
  if (stored == fingerprint || allow_stale_index) return Status::Ok();
  return Status::InvalidInput(
      "the reference index of schema " + config_.store.schema +
      " was built for other projections (their relations changed in the config); "
      "run `denormd rebuild -c " + config_.path + "` once to rebuild it");
}

Status PostgresStore::MarkIndexCurrent() {
  const std::string fingerprint = ProjectionPlan(config_).IndexFingerprint();
  return Guard("recording the reference index", [&] {
    pqxx::work work(connection_->pq);
    work.exec_params("insert into " + work.quote_name(config_.store.schema) +
                         ".meta (key, value) values ('index', $1)"
                         " on conflict (key) do update set value = excluded.value",
                     fingerprint);
    work.commit();
  });
}

Status PostgresStore::CreateTables() {
  DENORMD_RETURN_IF_ERROR(Connect());
  const std::vector<std::string> collections = config_.CollectionNames();
  // Fast path: everything exists. CREATE INDEX IF NOT EXISTS takes a share
  // lock on its table even when the index exists, which would make a start
  // wait for (and stall) the batches of running instances.
  bool complete = false;
  DENORMD_RETURN_IF_ERROR(Guard("checking the schema", [&] {
    pqxx::nontransaction work(connection_->pq);
    const std::string s = work.quote_name(config_.store.schema) + ".";
    std::vector<std::string> relations;
    for (const char* table : {"entities", "refs", "refs_by_entity", "ref_counts", "positions", "locks", "meta",
                              "writers", "dead_letters"}) {
      relations.push_back(s + table);
    }
    for (const std::string& collection : collections) {
      relations.push_back(s + work.quote_name(collection));
      relations.push_back(s + work.quote_name(collection + "_by_pk"));
    }
    complete = work.exec_params1("select count(*) from unnest($1::text[]) r"
                                 " where to_regclass(r) is null",
                                 PgTextArray(relations))[0]
                   .as<int>() == 0;
  }));
  if (complete) return Status::Ok();
  return Guard("creating the schema", [&] {
    pqxx::work work(connection_->pq);
    const std::string s = work.quote_name(config_.store.schema);
    // Serializes concurrent start-ups: CREATE ... IF NOT EXISTS is not safe
    // against a concurrent identical CREATE.
    work.exec("select pg_advisory_xact_lock(" +
              std::to_string(AdvisoryLockId("denormd schema " + config_.store.schema)) + ")");
    work.exec("create schema if not exists " + s);
    work.exec("create table if not exists " + s +
              ".entities (type text collate \"C\" not null, id text collate \"C\" not null,"
              " version numeric(20, 0), deleted boolean not null default false, data jsonb,"
              " updated_at timestamptz not null default now(), primary key (type, id))");
    work.exec("create table if not exists " + s +
              ".refs (type text collate \"C\" not null, field text collate \"C\" not null,"
              " target text collate \"C\" not null, sort bytea not null default '',"
              " id text collate \"C\" not null, primary key (type, field, target, sort, id))");
    work.exec("create index if not exists refs_by_entity on " + s + ".refs (type, id)");
    work.exec("create table if not exists " + s +
              ".ref_counts (type text collate \"C\" not null, field text collate \"C\" not null,"
              " target text collate \"C\" not null, count bigint not null,"
              " primary key (type, field, target))");
    work.exec("create table if not exists " + s +
              ".positions (source text not null, partition integer not null,"
              " position bigint not null, applied bigint not null default 0,"
              " stale bigint not null default 0, dead bigint not null default 0,"
              " updated_at timestamptz not null default now(), primary key (source, partition))");
    work.exec("create table if not exists " + s + ".locks (key bigint primary key)");
    work.exec("create table if not exists " + s + ".writers (note text)");
    work.exec("create table if not exists " + s +
              ".meta (key text primary key, value text not null)");
    work.exec("create table if not exists " + s +
              ".dead_letters (seq bigserial primary key, source text not null,"
              " partition integer not null, position bigint not null, raw bytea not null,"
              " reason text not null, received_at timestamptz not null default now())");
    for (const std::string& collection : collections) {
      const std::string table = s + "." + work.quote_name(collection);
      work.exec("create table if not exists " + table +
                " (id text collate \"C\" primary key, doc jsonb not null, pk text collate \"C\","
                " projection text not null)");
      work.exec("create index if not exists " + work.quote_name(collection + "_by_pk") + " on " +
                table + " (projection, pk)");
    }
    work.commit();
  });
}

Status PostgresStore::Begin(std::unique_ptr<StoreTransaction>* out) {
  DENORMD_RETURN_IF_ERROR(Connect());
  return Guard("starting a transaction", [&] {
    auto* txn = new PostgresTransaction(
        connection_->pq, config_.store.schema,
        [this](const std::string& key_array) { return ProvisionLockRows(key_array); });
    out->reset(txn);
    txn->PinIndexPlans();
  });
}

Status PostgresStore::ProvisionLockRows(const std::string& key_array) {
  if (!provisioner_ || !provisioner_->pq.is_open()) {
    provisioner_.reset();
    DENORMD_RETURN_IF_ERROR(Guard("connecting to PostgreSQL (lock rows)", [&] {
      provisioner_ = std::make_unique<Connection>(connection_string_);
    }));
  }
  return Guard("creating lock rows", [&] {
    pqxx::nontransaction work(provisioner_->pq);
    work.exec_params("insert into " + work.quote_name(config_.store.schema) +
                         ".locks (key) select k from unnest($1::bigint[]) k on conflict do nothing",
                     key_array);
  });
}

Status PostgresStore::Summarize(StoreSummary* out) {
  DENORMD_RETURN_IF_ERROR(Connect());
  const std::vector<std::string> collections = config_.CollectionNames();
  return Guard("reading the status", [&] {
    pqxx::read_transaction work(connection_->pq);
    const std::string s = work.quote_name(config_.store.schema);
    for (const auto& row : work.exec("select source, partition, position, applied, stale, dead"
                                     " from " + s + ".positions order by source, partition")) {
      StoredPosition position;
      position.at = {row[0].c_str(), row[1].as<int32_t>(), row[2].as<int64_t>()};
      position.applied = row[3].as<uint64_t>();
      position.stale = row[4].as<uint64_t>();
      position.dead = row[5].as<uint64_t>();
      out->positions.push_back(position);
    }
    for (const std::string& collection : collections) {
      auto row = work.exec1("select count(*) from " + s + "." + work.quote_name(collection));
      out->documents.emplace_back(collection, row[0].as<uint64_t>());
    }
    for (const auto& row : work.exec("select type, count(*) filter (where not deleted),"
                                     " count(*) filter (where deleted) from " + s +
                                     ".entities group by type order by type")) {
      out->entities.emplace_back(row[0].c_str(), row[1].as<uint64_t>());
      out->tombstones += row[2].as<uint64_t>();
    }
    out->dead_letters = work.exec1("select count(*) from " + s + ".dead_letters")[0].as<uint64_t>();
  });
}

Status PostgresStore::Execute(const std::string& sql, std::vector<std::string>* rows) {
  DENORMD_RETURN_IF_ERROR(Connect());
  return Guard("executing SQL", [&] {
    pqxx::work work(connection_->pq);
    pqxx::result result = work.exec(sql);
    work.commit();
    if (rows == nullptr) return;
    for (const auto& row : result) {
      std::string line;
      for (pqxx::row::size_type i = 0; i < row.size(); ++i) {
        if (i) line += '\t';
        line += row[i].is_null() ? "" : row[i].c_str();
      }
      rows->push_back(line);
    }
  });
}

}  // namespace denormd
