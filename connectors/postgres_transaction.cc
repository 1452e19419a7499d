#include "connectors/postgres_transaction.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <pqxx/pqxx>

#include "connectors/postgres_sql.h"
#include "projections/json_writer.h"

namespace denormd {

namespace {

std::string Text(const rapidjson::StringBuffer& buffer) {
  return std::string(buffer.GetString(), buffer.GetSize());
}

// The members "source", "partition" and "position" of a JSON row.
void WritePositionMembers(JsonWriter& w, const SourcePosition& at) {
  w.Key("source");
  WriteJsonString(w, at.source);
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
  PostgresTransaction(pqxx::connection_base& connection, ConnectionState& state,
                      const std::string& schema, const ChangeCapture& capture,
                      uint64_t epoch, LockRowProvisioner provision)
      : work_(connection),
        state_(state),
        schema_(work_.quote_name(schema)),
        capture_(capture),
        epoch_(epoch),
        provision_([this, provision = std::move(provision)](const std::string& keys) {
          Sent();
          return provision(keys);
        }) {
    // BEGIN goes with the transaction's first statements.
    pending_.push_back({"starting a transaction", "begin", nullptr, nullptr});
  }

  // Rolls back what was sent and not committed. A broken connection has
  // nothing left to roll back (and is not reopened: PostgresStore opens the
  // connection with reactivation off).
  ~PostgresTransaction() override {
    if (!begun_ || ended_) return;
    try {
      work_.exec("rollback");
    } catch (...) {
    }
  }

  SourceRows& source() override { return *this; }
  ReferenceIndex& index() override { return *this; }
  DocumentTables& documents() override { return *this; }
  StreamLedger& ledger() override { return *this; }
  WriteLocks& locks() override { return *this; }

  // COMMIT goes with the deferred statements, unless one of them has a
  // check that can refuse the transaction: those are sent and checked first,
  // since a check runs on the result, after the server executed the rest.
  // (The positions' fence is the server's own: it fails the statement.)
  Status Commit() override {
    const bool checked = std::any_of(pending_.begin(), pending_.end(), [](const Deferred& d) {
      return d.check != nullptr && d.may_refuse;
    });
    if (checked) DENORMD_RETURN_IF_ERROR(Guard("committing", [&] { Flush(nullptr); }));
    pending_.push_back({"committing", "commit", nullptr, nullptr});
    DENORMD_RETURN_IF_ERROR(Guard("committing", [&] { Flush(nullptr); }));
    ended_ = true;
    return Status::Ok();
  }

  void SetChangeSource(const std::string& source) override { change_source_ = source; }

  // Before the transaction's first statement: its BEGIN says so.
  Status PinReadSnapshot() override {
    if (begun_ || pending_.empty() || pending_.front().sql != "begin") {
      return Status::Fatal("internal: a read-only snapshot is pinned before the first statement");
    }
    // Alone: in a pipeline, libpqxx's own first statement would precede it.
    pending_.erase(pending_.begin());
    begun_ = true;
    Sent();
    return Guard("starting a read-only snapshot", [&] {
      work_.exec("begin isolation level repeatable read, read only");
    });
  }

  // Every statement of the engine is a keyed lookup or a range of one key, for
  // which an index nested loop is the right plan at any table size. Tables
  // that grow fast (a first load) have statistics minutes old, with which
  // the planner picks scans and hash joins that cost seconds; forbid those.
  uint64_t round_trips() const override { return round_trips_; }
  uint64_t statements() const override { return statements_; }

  // ---- WriteLocks

  // Also the configuration fence: once the lock is held no apply can switch
  // configurations until this transaction ends, and the epoch read after it
  // (its own statement, so its own snapshot) is the one in force. A
  // transaction of another epoch writes nothing (StaleConfig). While an
  // apply builds, the source changes written are journaled for it.
  //
  // Both statements are deferred (sent with the batch's first read); the
  // epoch is checked on their result, before any write can commit.
  Status LockWriters(bool exclusive) override {
    pending_.push_back({"joining the writers",
                        std::string("lock table ") + schema_ + ".writers in " +
                            (exclusive ? "exclusive" : "share") + " mode",
                        nullptr, nullptr});
    writers_checked_ = false;
    pending_.push_back(
        {"joining the writers",
         "select coalesce((select value from " + schema_ + ".meta where key = 'epoch'), '0'),"
         " exists (select 1 from " + schema_ + ".meta where key = 'applying')",
         [this](const pqxx::result& result) {
           const uint64_t stored = std::strtoull(result[0][0].c_str(), nullptr, 10);
           journal_ = result[0][1].as<bool>();
           writers_checked_ = true;
           if (epoch_ != 0 && stored != epoch_) {
             return Status::StaleConfig("the projections of schema " + schema_ +
                                        " changed to epoch " + std::to_string(stored) +
                                        " (denormd apply) while this process ran epoch " +
                                        std::to_string(epoch_));
           }
           return Status::Ok();
         },
         nullptr});
    return Status::Ok();
  }

  Status LockKeys(const std::vector<std::string>& keys, Mode mode) override {
    std::vector<int64_t> ids;
    for (const std::string& key : keys) ids.push_back(LockRowId(key));
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    if (ids.empty()) return Status::Ok();
    // A key is a row of the locks table; its lock is a row lock, which
    // PostgreSQL keeps in the row itself, so a fan-out that locks 100,000
    // documents cannot exhaust the shared lock table. Missing rows are
    // created by a separate autocommit connection: inserting them here would
    // make this transaction wait for another one's uncommitted insert.
    const std::string nowait = mode == Mode::kNoWait ? " nowait" : "";
    std::vector<int64_t> unknown;
    for (int64_t id : ids) {
      if (!state_.lock_rows.count(id)) unknown.push_back(id);
    }
    // The keys are locked in one statement, in key order, so that two
    // waiting writers cannot deadlock: every row must exist first.
    if (!unknown.empty()) DENORMD_RETURN_IF_ERROR(provision_(PgBigintArray(unknown)));
    if (state_.lock_rows.size() > (4u << 20)) state_.lock_rows.clear();
    state_.lock_rows.insert(ids.begin(), ids.end());
    // Deferred: sent with the next read, which runs after the locks are
    // held (or fails with them). A row missing from the result was pruned
    // since this process last saw it, and so, most likely, were the others
    // it remembers: a prune removes every lock row no batch holds. All are
    // forgotten, so that the retry of the batch and the batches after it
    // create their rows again; forgetting only this batch's would fail the
    // next batches one after another (a soak measured a retry every few
    // seconds for minutes after each prune).
    const std::string what = "locking " + std::to_string(ids.size()) + " keys";
    Defer({what,
           "",
           [this, ids](const pqxx::result& rows) {
             if (rows.size() == ids.size()) return Status::Ok();
             state_.lock_rows.clear();
             return Status::Transient("lock rows vanished while locking (pruned concurrently)");
           },
           [what, nowait](const std::exception& e) {
             // Without waiting, a held lock is Busy: roll back and try again.
             const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e);
             if (!nowait.empty() && sql != nullptr && sql->sqlstate() == "55P03") {
               return Status::Busy(what + ": a key is held");
             }
             return FromPostgresException(e, what);
           }},
          "select key from " + schema_ +
              ".locks where key = any($1::bigint[]) order by key for update" + nowait,
          PgBigintArray(ids));
    return Status::Ok();
  }

  // ---- SourceRows

  // The records this transaction wrote are served from memory: their rows
  // stay locked until it ends (the UPDATE's row lock), so they are what a
  // read would return. Only the other keys are read.
  Status LoadEntities(const std::vector<EntityKey>& keys,
                      std::vector<EntityRecord>* out) override {
    std::vector<std::string> types, ids;
    for (const EntityKey& key : keys) {
      auto written = written_.find(key);
      if (written != written_.end()) {
        out->push_back(written->second);
        continue;
      }
      types.push_back(key.type);
      ids.push_back(key.id);
    }
    if (ids.empty()) return Status::Ok();
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard("loading entities", [&] {
      rows = Run(
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
    ForgetScan();
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
    const std::string counts = CountDeltasSql();
    const std::string upsert =
        "e as (insert into " + schema_ + ".entities as t (type, id, version, deleted, data)"
        " select x.type, x.id, x.version, x.deleted, x.data from jsonb_to_recordset($1::jsonb)"
        " as x(type text, id text, version numeric, deleted boolean, data jsonb)"
        " on conflict (type, id) do update set version = excluded.version,"
        " deleted = excluded.deleted, data = excluded.data, updated_at = now())";
    auto insert = [&](const std::string& param) { return InsertRowsSql(param); };
    if (!replace_types.empty() && replace_types.size() != writes.size()) {
      return Status::Fatal("internal: entity writes that replace their index rows and writes that "
                           "change them cannot share a call");
    }
    // Deferred: the rows are served from written_ until the statement runs.
    const std::string what = "writing " + std::to_string(writes.size()) + " entities";
    const Status written = Guard(what, [&] {
      if (replace_types.empty()) {
        Defer({what}, "with " + upsert + ", " + insert("$2") + ", " + DeleteRowsSql("$3") + "," +
                          counts,
              Text(entities), Text(added), Text(removed));
        return;
      }
      // Reindexing: every stored row of these entities goes first, then
      // their rows are inserted (two statements: one row may be in both).
      Defer({what},
            "with " + upsert + ","
            " d as (delete from " + schema_ + ".refs r using unnest($2::text[], $3::text[]) k(type, id)"
            " where r.type = k.type and r.id = k.id returning r.type, r.field, r.target),"
            " i as (select null::text as type, null::text as field, null::text as target where false),"
            + counts,
            Text(entities), PgTextArray(replace_types), PgTextArray(replace_ids));
      Defer({what},
            "with " + insert("$1") + ","
            " d as (select null::text as type, null::text as field, null::text as target where false),"
            + counts,
            Text(added));
    });
    if (written.ok()) {
      for (const EntityWrite& write : writes) written_[write.record.key] = write.record;
    }
    return written;
  }

  Status Journal(const std::vector<EntityChange>& changes) override {
    if (changes.empty()) return Status::Ok();
    // Whether an apply is building is known once the writers' statement ran.
    if (!writers_checked_) {
      DENORMD_RETURN_IF_ERROR(Guard("joining the writers", [&] { Flush(nullptr); }));
    }
    if (!journal_) return Status::Ok();
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
      Defer({what}, "insert into " + schema_ + ".apply_journal (type, id, before, after)"
          " select x.type, x.id, x.before, x.after from jsonb_to_recordset($1::jsonb)"
          " as x(type text, id text, before jsonb, after jsonb)",
          Text(buffer));
    });
  }

  Status TakeJournal(size_t limit, std::vector<JournaledChange>* out) override {
    out->clear();
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard("taking the apply journal", [&] {
      rows = Run("with taken as (delete from " + schema_ + ".apply_journal where seq in"
                 " (select seq from " + schema_ + ".apply_journal order by seq"
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

  // Administration's statements in this transaction (apply's switch,
  // connectors/postgres_admin.cc): ExecuteInPostgresTransaction.
  Status RunStatement(const std::string& sql, std::vector<std::string>* rows) {
    ForgetScan();
    return Guard("executing SQL", [&] {
      if (!pending_.empty()) Flush(nullptr);
      Sent();
      RowsAsText(work_.exec(sql), rows);
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
        // Only live entities: the rows of a relation that `denormd apply` is
        // building may name one deleted since (its catch-up removes them).
        with_data ? "select t.target, encode(x.sort, 'hex'), e.id, e.version::text, e.data::text" +
                        scans + " join " + schema_ + ".entities e on e.type = $1 and e.id = x.id"
                        " and not e.deleted and e.data is not null"
                  : "select t.target, encode(x.sort, 'hex'), x.id" + scans;
    // Two fields of one projection that read the same relation (a lookup
    // and an id list through one link) ask the same ranges one after the
    // other: the second is answered from the first, which ran under the
    // same locks. Forgotten when this transaction writes index rows.
    std::string key = relation.entity_type() + '\x1f' + relation.name() + '\x1f' +
                      (with_data ? "d" : "k") + '\x1f' + arrays.target + '\x1f' + arrays.sort +
                      '\x1f' + arrays.id + '\x1f' + arrays.backward + '\x1f' + arrays.limit;
    if (key != last_scan_key_) {
      last_scan_key_.clear();
      last_scan_.clear();
      pqxx::result rows;
      DENORMD_RETURN_IF_ERROR(Guard(with_data ? "loading referrers" : "finding referrers", [&] {
        rows = Run(sql, relation.entity_type(), relation.name(), arrays.target, arrays.sort,
                   arrays.id, arrays.backward, arrays.limit);
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
        last_scan_.push_back(std::move(referrer));
      }
      last_scan_key_ = std::move(key);
    }
    out->insert(out->end(), last_scan_.begin(), last_scan_.end());
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
        rows = Run("select target, count from " + schema_ +
                                     ".ref_counts where type = $1 and field = $2 and"
                                     " target = any($3::text[]) and count > 0",
                                 relation.entity_type(), relation.name(), PgTextArray(whole));
      }));
      for (const auto& row : rows) (*out)[row[0].c_str()] = row[1].as<uint64_t>();
    }
    if (from.empty()) return Status::Ok();
    const RangeArrays arrays(from);
    DENORMD_RETURN_IF_ERROR(Guard("counting referrers", [&] {
      rows = Run(
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
      rows = Run("select distinct target from " + schema_ +
                                   ".refs where type = $1 and field = $2 and target > $3"
                                   " order by target limit $4",
                               relation.entity_type(), relation.name(), after,
                               static_cast<int64_t>(limit));
    }));
    for (const auto& row : rows) out->push_back(row[0].c_str());
    return Status::Ok();
  }

  Status RowsOf(const std::vector<EntityKey>& entities, std::vector<StoredRow>* out) override {
    if (entities.empty()) return Status::Ok();
    std::vector<std::string> types, ids;
    for (const EntityKey& key : entities) {
      types.push_back(key.type);
      ids.push_back(key.id);
    }
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard("reading index rows", [&] {
      rows = Run("select r.type, r.id, r.field, r.target, encode(r.sort, 'hex') from " + schema_ +
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

  Status RecountTargets() override {
    const std::string counts = schema_ + ".ref_counts";
    return Guard("recounting the reference index", [&] {
      Run("with actual as (select type, field, target, count(*) as n from " + schema_ +
          ".refs group by 1, 2, 3),"
          " fixed as (insert into " + counts + " as c (type, field, target, count)"
          " select type, field, target, n from actual order by 1, 2, 3"
          " on conflict (type, field, target) do update set count = excluded.count"
          " where c.count <> excluded.count)"
          " update " + counts + " c set count = 0 where c.count <> 0 and not exists ("
          "select 1 from actual a where a.type = c.type and a.field = c.field"
          " and a.target = c.target)");
    });
  }

  Status WriteRows(const std::vector<OwnedRows>& writes) override {
    ForgetScan();
    rapidjson::StringBuffer added, removed;
    JsonWriter a(added), r(removed);
    a.StartArray();
    r.StartArray();
    size_t rows = 0;
    for (const OwnedRows& write : writes) {
      for (const ReferenceRow& row : write.added) WriteIndexRow(a, write.owner, row);
      for (const ReferenceRow& row : write.removed) WriteIndexRow(r, write.owner, row);
      rows += write.added.size() + write.removed.size();
    }
    a.EndArray();
    r.EndArray();
    if (rows == 0) return Status::Ok();
    // As in WriteEntities, without the records: the rows actually inserted
    // or deleted move the counters.
    return Guard("writing " + std::to_string(rows) + " index rows", [&] {
      Run("with " + InsertRowsSql("$1") + ", " + DeleteRowsSql("$2") + "," + CountDeltasSql(),
          Text(added), Text(removed));
    });
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
      WriteJsonString(w, row.id);
      w.Key("pk");
      if (row.pk) {
        WriteJsonString(w, *row.pk);
      } else {
        w.Null();
      }
      w.Key("doc");
      w.RawValue(row.json.data(), row.json.size(), rapidjson::kObjectType);
      if (row.bucket) WriteBucketMeta(w, *row.bucket);
      w.EndObject();
    }
    w.EndArray();
    // A shared collection is keyed on (pk, id): a document whose key another
    // projection's document holds is refused as data, naming both (the
    // batch loop then finds the event responsible).
    const bool shared = projection.shared_collection;
    const std::string key = shared ? "((coalesce(pk, '')), id)" : "(id)";
    const std::string values =
        "x as (select * from jsonb_to_recordset($1::jsonb) as x(id text, doc jsonb, pk text,"
        " seq bigint, number bigint, lo_sort text, lo_id text, members integer, member_keys text))";
    // A document whose partition key changed moves: its row under the old
    // key goes (`moved`; that key differs from every key inserted).
    const std::string clash =
        shared ? ", clash as (select c.id, c.pk, c.projection from " + Table(projection) +
                     " c join x on coalesce(c.pk, '') = coalesce(x.pk, '') and c.id = x.id"
                     " where c.projection <> $2),"
                     " moved as (delete from " + Table(projection) + " c using x"
                     " where c.projection = $2 and c.id = x.id"
                     " and coalesce(c.pk, '') <> coalesce(x.pk, '')"
                     " and not exists (select 1 from clash) returning c.id, c.pk)"
               : "";
    // Change capture (published collections): the rows written go to the
    // outbox in the same statement, and so does a document that left its
    // old pk — deleted under the old key (`moved` in a shared collection;
    // in a collection of one projection with a partition key, the row keeps
    // its id and the old pk is read before the statement writes: all its
    // parts see one snapshot).
    const bool captured = Captured(projection);
    const bool old_pk = captured && !shared && capture_.partitioned.count(projection.collection);
    const std::string old_pks =
        old_pk ? ", o as (select c.id, c.pk from " + Table(projection) +
                     " c where c.id in (select id from x))"
               : "";
    std::string capture;
    if (captured) {
      std::string changes = "select w.id, w.pk, w.doc, 1 as k from w";
      if (shared) {
        changes = "select m.id, m.pk, null::jsonb as doc, 0 as k from moved m union all " + changes;
      } else if (old_pk) {
        changes = "select o.id, o.pk, null::jsonb as doc, 0 as k from w join o on o.id = w.id"
                  " where o.pk is distinct from w.pk union all " + changes;
      }
      capture = ", " + CaptureCte("(" + changes + ")");
    }
    const std::string sql =
        "with " + values + clash + old_pks + ", w as (insert into " + Table(projection) +
        " as c (id, doc, pk, projection, seq, number, lo_sort, lo_id, members, member_keys)"
        " select x.id, x.doc, x.pk, $2, x.seq, x.number, decode(x.lo_sort, 'hex'), x.lo_id,"
        " x.members, decode(x.member_keys, 'hex') from x" + (shared ? " where not exists (select 1 from clash)" : "") +
        " on conflict " + key + " do update set doc = excluded.doc, pk = excluded.pk,"
        " projection = excluded.projection, seq = excluded.seq, number = excluded.number,"
        " lo_sort = excluded.lo_sort, lo_id = excluded.lo_id, members = excluded.members,"
        " member_keys = excluded.member_keys"
        " where c.doc is distinct from excluded.doc or c.pk is distinct from excluded.pk"
        " or c.projection is distinct from excluded.projection"
        " or c.seq is distinct from excluded.seq or c.number is distinct from excluded.number"
        " or c.lo_sort is distinct from excluded.lo_sort"
        " or c.lo_id is distinct from excluded.lo_id"
        " or c.members is distinct from excluded.members"
        " or c.member_keys is distinct from excluded.member_keys returning " +
        (captured ? "c.id, c.pk, c.doc" : "1") + ")" + capture +
        " select (select count(*) from w)" + (shared ? " + (select count(*) from moved)" : "") +
        (shared ? ", (select id || ' (partition ' || coalesce(pk, 'none') || ') of projection '"
                  " || projection from clash limit 1)"
                : "");
    // Deferred: the count is added (and a clash refuses the transaction)
    // when the statement has run, with the next read or before COMMIT.
    const std::string what = "writing documents of " + projection.name;
    Deferred write{what, "",
                   [shared, written, collection = projection.collection,
                    name = projection.name](const pqxx::result& result) {
                     if (shared && !result[0][1].is_null()) {
                       return Status::InvalidInput(
                           "collection " + collection + ": a document of " + name +
                           " has the key of document " + result[0][1].c_str() +
                           " (documents of a shared collection need unique (partition key, id)"
                           " pairs)");
                     }
                     *written += result[0][0].as<uint64_t>();
                     return Status::Ok();
                   },
                   nullptr, /*may_refuse=*/shared};
    return Guard(what, [&] {
      if (captured) {
        Defer(std::move(write), sql, Text(buffer), projection.name, projection.collection,
              change_source_);
      } else {
        Defer(std::move(write), sql, Text(buffer), projection.name);
      }
    });
  }

  Status Delete(const ProjectionConfig& projection, const std::vector<std::string>& ids,
                uint64_t* deleted) override {
    return DeleteWhere(projection, "id = any($2::text[])", PgTextArray(ids), "", deleted);
  }

  Status DeleteByPkExcept(const ProjectionConfig& projection, const std::vector<std::string>& pks,
                          const std::vector<std::string>& keep, uint64_t* deleted) override {
    return DeleteWhere(projection, "pk = any($2::text[]) and id <> all($3::text[])",
                       PgTextArray(pks), PgTextArray(keep), deleted);
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

  Status ProbeBuckets(const ProjectionConfig& projection,
                      const std::vector<std::pair<std::string, IndexKey>>& probes,
                      std::vector<BucketSlot>* out) override {
    if (probes.empty()) return Status::Ok();
    std::vector<std::string> groups, sorts, ids;
    for (const auto& probe : probes) {
      groups.push_back(probe.first);
      sorts.push_back(HexEncode(probe.second.sort));
      ids.push_back(probe.second.id);
    }
    const std::string table = Table(projection);
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
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard("finding buckets of " + projection.name, [&] {
      rows = Run(
          homes + " select p.i, w.below, w.id, w.number, w.seq, w.lo_sort, w.lo_id, w.members"
          " from q p"
          " cross join lateral ((select true as below, " + columns + where + "<=" + bound +
              " order by c.lo_sort desc, c.lo_id desc limit " + window + ")"
          " union all (select false, " + columns + where + ">" + bound +
              " order by c.lo_sort, c.lo_id limit " + window + ")) w(below, id, number, seq,"
              " lo_sort, lo_id, members)",
          projection.name, PgTextArray(groups), PgTextArray(sorts), PgTextArray(ids));
    }));
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
    return Status::Ok();
  }

  Status MaxBucketNumbers(const ProjectionConfig& projection,
                          const std::vector<std::string>& groups,
                          std::map<std::string, uint64_t>* out) override {
    if (groups.empty()) return Status::Ok();
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard("numbering buckets of " + projection.name, [&] {
      rows = Run("select g, (select c.number from " + Table(projection) +
                                   " c where c.projection = $1 and c.pk = g and c.number is not null"
                                   " order by c.number desc limit 1) from unnest($2::text[]) g",
                               projection.name, PgTextArray(groups));
    }));
    for (const auto& row : rows) {
      if (!row[1].is_null()) (*out)[row[0].c_str()] = row[1].as<uint64_t>();
    }
    return Status::Ok();
  }

  Status RespaceBuckets(const ProjectionConfig& projection, const std::string& group, int64_t after,
                        int64_t before, int64_t step, uint64_t* written) override {
    const std::string table = Table(projection);
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
      if (!Captured(projection)) {
        pqxx::result result = Run(update, projection.name, group, after, before, step);
        *written += result.affected_rows();
        return;
      }
      // A re-spacing changes the seq of each bucket it moves: each is a
      // document change.
      pqxx::result result = Run("with w as (" + update + " returning c.id, c.pk, c.doc), " +
                                    CaptureCte("(select w.id, w.pk, w.doc, 1 as k from w)", 6) +
                                    " select count(*) from w",
                                projection.name, group, after, before, step, projection.collection,
                                change_source_);
      *written += result[0][0].as<uint64_t>();
    });
  }

  // ---- StreamLedger

  Status LoadPositions(const std::string& source, std::vector<StoredPosition>* out) override {
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard("loading positions", [&] {
      rows = Run("select partition, position, applied, stale, dead from " + schema_ +
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

  // One statement, deferred (it goes with COMMIT): existing streams are
  // advanced, new streams inserted. A fenced stream whose stored position is
  // not the one the batch expected (or that another inserter created first)
  // is given a NULL position, which the column's NOT NULL refuses: the
  // statement fails, and the transaction with it, before COMMIT runs; that
  // failure is the Conflict. The UPDATE's row lock makes a second committer
  // of a stream wait and then compare with the first one's position (READ
  // COMMITTED evaluates the new value again on the row it waited for); an
  // insert that meets a row committed meanwhile becomes that update.
  Status SavePositions(const std::vector<PositionUpdate>& updates) override {
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
      w.Key("fenced");
      w.Bool(update.expected_previous.has_value());
      w.Key("expected");
      w.Int64(update.expected_previous.value_or(-1));
      w.EndObject();
    }
    w.EndArray();
    const std::string table = schema_ + ".positions";
    // What a Conflict names: the fenced streams and where the batch expected them.
    std::string fenced;
    for (const PositionUpdate& update : updates) {
      if (!update.expected_previous) continue;
      fenced += (fenced.empty() ? "" : " or ") + update.at.source + " partition " +
                std::to_string(update.at.partition) + " (expected at " +
                std::to_string(*update.expected_previous) + ")";
    }
    const std::string what = "saving positions";
    return Guard(what, [&] {
      Defer({what, "", nullptr,
             [what, fenced](const std::exception& e) {
               const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e);
               if (sql != nullptr && sql->sqlstate() == "23502") {
                 return Status::Conflict(fenced + " is not at the position this batch expected:"
                                         " another consumer applied these events");
               }
               return FromPostgresException(e, what);
             }},
            "with x as (select * from jsonb_to_recordset($1::jsonb) as x(source text,"
            " partition integer, position bigint, applied bigint, stale bigint, dead bigint,"
            " fenced boolean, expected bigint)),"
            " u as (update " + table + " p set position = case when not x.fenced"
            " or p.position = x.expected then x.position end,"
            " applied = p.applied + x.applied, stale = p.stale + x.stale, dead = p.dead + x.dead,"
            " updated_at = now() from x where p.source = x.source and p.partition = x.partition"
            " returning p.source, p.partition),"
            // A fenced new stream: created meanwhile by another consumer is the Conflict.
            " f as (insert into " + table + " (source, partition, position, applied, stale, dead)"
            " select source, partition, case when x.expected = -1 then position end, applied,"
            " stale, dead from x where x.fenced and not exists (select 1 from u"
            " where u.source = x.source and u.partition = x.partition)"
            " on conflict (source, partition) do update set position = null)"
            " insert into " + table + " as p (source, partition, position, applied, stale, dead)"
            " select source, partition, position, applied, stale, dead from x where not x.fenced"
            " and not exists (select 1 from u where u.source = x.source and u.partition = x.partition)"
            " on conflict (source, partition) do update set position = excluded.position,"
            " applied = p.applied + excluded.applied, stale = p.stale + excluded.stale,"
            " dead = p.dead + excluded.dead, updated_at = now()",
            Text(buffer));
    });
  }

  Status RecordFanOuts(const std::vector<FanOutStat>& stats) override {
    if (stats.empty()) return Status::Ok();
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.StartArray();
    for (const FanOutStat& stat : stats) {
      w.StartObject();
      w.Key("type");
      WriteJsonString(w, stat.type);
      w.Key("field");
      WriteJsonString(w, stat.field);
      w.Key("changes");
      w.Uint64(stat.changes);
      w.Key("documents");
      w.Uint64(stat.documents);
      w.Key("max_documents");
      w.Uint64(stat.max_documents);
      w.Key("max_id");
      WriteJsonString(w, stat.max_id);
      w.EndObject();
    }
    w.EndArray();
    return Guard("recording fan-out statistics", [&] {
      // Kept a week: the hours older go as the next hour's first rows come.
      Run("with old as (delete from " + schema_ + ".fanout_stats where hour < now() -"
              " interval '7 days') insert into " + schema_ + ".fanout_stats as f (hour, type, field, changes, documents,"
              " max_documents, max_id) select date_trunc('hour', now()), x.type, x.field,"
              " x.changes, x.documents, x.max_documents, x.max_id from jsonb_to_recordset($1::jsonb)"
              " as x(type text, field text, changes bigint, documents bigint, max_documents bigint,"
              " max_id text) on conflict (hour, type, field) do update set"
              " changes = f.changes + excluded.changes, documents = f.documents + excluded.documents,"
              " max_documents = greatest(f.max_documents, excluded.max_documents),"
              " max_id = case when excluded.max_documents > f.max_documents then excluded.max_id"
              " else f.max_id end",
          Text(buffer));
    });
  }

  Status ReadFanOuts(uint64_t within_seconds, std::vector<FanOutStat>* out) override {
    out->clear();
    return Guard("reading fan-out statistics", [&] {
      pqxx::result rows = Run(
          "select type, field, changes, documents, max_documents, max_id,"
          " extract(epoch from hour)::bigint from " + schema_ + ".fanout_stats"
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

  Status AddDeadLetters(const std::vector<DeadLetter>& letters) override {
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.StartArray();
    for (const DeadLetter& letter : letters) {
      w.StartObject();
      WritePositionMembers(w, letter.at);
      w.Key("raw");
      WriteJsonString(w, HexEncode(letter.raw));
      w.Key("reason");
      WriteJsonString(w, letter.reason);
      w.EndObject();
    }
    w.EndArray();
    return Guard("writing dead letters", [&] {
      Defer({"writing dead letters"},
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

  bool Captured(const ProjectionConfig& projection) const {
    return capture_.published.count(projection.collection) > 0;
  }

  // "y as (insert into <schema>.outbox ...)": the changes `rows` (a
  // subquery of id, pk, doc and k, the order within one id) captured in the
  // outbox, with the collection in parameter $<first> and the change source
  // in the next one. Their seqs follow (id, k): a pk change's delete comes
  // before the new document.
  std::string CaptureCte(const std::string& rows, int first = 3) const {
    return "y as (insert into " + schema_ + ".outbox (collection, id, pk, doc, source)"
           " select $" + std::to_string(first) + "::text, f.id, f.pk, f.doc, $" +
           std::to_string(first + 1) + "::text from " + rows + " f order by f.id, f.k)";
  }

  // Deletes the documents of `projection` matching `condition` (over $2 and,
  // when `b` is not empty, $3), capturing them when the collection is published.
  Status DeleteWhere(const ProjectionConfig& projection, const std::string& condition,
                     const std::string& a, const std::string& b, uint64_t* deleted) {
    const std::string statement =
        "delete from " + Table(projection) + " where projection = $1 and " + condition;
    // Deferred: the count is added when the statement has run.
    const std::string what = "deleting documents of " + projection.name;
    return Guard(what, [&] {
      if (!Captured(projection)) {
        Deferred count{what, "",
                       [deleted](const pqxx::result& result) {
                         *deleted += result.affected_rows();
                         return Status::Ok();
                       },
                       nullptr, /*may_refuse=*/false};
        if (b.empty()) {
          Defer(std::move(count), statement, projection.name, a);
        } else {
          Defer(std::move(count), statement, projection.name, a, b);
        }
        return;
      }
      const int first = b.empty() ? 3 : 4;
      const std::string sql =
          "with w as (" + statement + " returning id, pk), " +
          CaptureCte("(select w.id, w.pk, null::jsonb as doc, 1 as k from w)", first) +
          " select count(*) from w";
      Deferred count{what, "",
                     [deleted](const pqxx::result& result) {
                       *deleted += result[0][0].as<uint64_t>();
                       return Status::Ok();
                     },
                     nullptr, /*may_refuse=*/false};
      if (b.empty()) {
        Defer(std::move(count), sql, projection.name, a, projection.collection, change_source_);
      } else {
        Defer(std::move(count), sql, projection.name, a, b, projection.collection,
              change_source_);
      }
    });
  }

  static void WriteBucketMeta(JsonWriter& w, const BucketMeta& meta) {
    w.Key("seq");
    w.Int64(meta.seq);
    w.Key("number");
    w.Uint64(meta.number);
    w.Key("members");
    w.Uint64(meta.members);
    if (meta.member_keys) {
      w.Key("member_keys");
      WriteJsonString(w, HexEncode(*meta.member_keys));
    }
    if (!meta.lo) return;
    w.Key("lo_sort");
    WriteJsonString(w, HexEncode(meta.lo->sort));
    w.Key("lo_id");
    WriteJsonString(w, meta.lo->id);
  }

  // [type, field, target, sort hex, id]
  // The index-row statements WriteEntities and WriteRows share, as parts of
  // one `with`: `i` inserts the rows of the JSON array `param` (those not
  // there already), `d` deletes those of `param` (those there), and the
  // final insert moves the per-target counters by what `i` and `d` returned
  // (+1 per row inserted, -1 per row deleted, applied in key order so that
  // concurrent writers cannot deadlock on the counters).
  std::string InsertRowsSql(const std::string& param) const {
    return "i as (insert into " + schema_ + ".refs (type, field, target, id, sort)"
           " select x->>0, x->>1, x->>2, x->>4, decode(x->>3, 'hex')"
           " from jsonb_array_elements(" + param + "::jsonb) x on conflict do nothing"
           " returning type, field, target)";
  }
  std::string DeleteRowsSql(const std::string& param) const {
    return " d as (delete from " + schema_ + ".refs r using jsonb_array_elements(" + param +
           "::jsonb) x where r.type = x->>0 and r.field = x->>1 and r.target = x->>2"
           " and r.sort = decode(x->>3, 'hex') and r.id = x->>4"
           " returning r.type, r.field, r.target)";
  }
  std::string CountDeltasSql() const {
    return " delta as (select type, field, target, sum(n)::bigint as n from ("
           " select type, field, target, -1 as n from d union all"
           " select type, field, target, 1 from i) u group by 1, 2, 3 having sum(n) <> 0)"
           " insert into " + schema_ + ".ref_counts as c (type, field, target, count)"
           " select type, field, target, n from delta order by 1, 2, 3"
           " on conflict (type, field, target) do update set count = c.count + excluded.count";
  }

  static void WriteIndexRow(JsonWriter& w, const EntityKey& key, const ReferenceRow& row) {
    w.StartArray();
    WriteJsonString(w, key.type);
    WriteJsonString(w, row.relation->name());
    WriteJsonString(w, row.target);
    WriteJsonString(w, HexEncode(row.sort));
    WriteJsonString(w, key.id);
    w.EndArray();
  }

  static void WriteEntityRow(JsonWriter& e, const EntityRecord& record) {
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

  Status ListStrings(const std::string& what, const std::string& sql, const std::string& a,
                     const std::string& after, size_t limit, std::vector<std::string>* out) {
    pqxx::result rows;
    DENORMD_RETURN_IF_ERROR(Guard(what, [&] {
      rows = Run(sql, a, after, static_cast<int64_t>(limit));
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
      rows = Run(
          "select id, pk, doc::text, number, seq, encode(lo_sort, 'hex'), lo_id, members,"
          " encode(member_keys, 'hex') from " +
              Table(projection) + " where projection = $1 and " + column + " = any($2::text[])",
          projection.name, PgTextArray(values));
    }));
    for (const auto& row : rows) {
      DocumentRow doc;
      doc.id = row[0].c_str();
      if (!row[1].is_null()) doc.pk = row[1].c_str();
      doc.json = row[2].c_str();
      if (!row[3].is_null()) {
        BucketMeta meta;
        meta.number = row[3].as<uint64_t>();
        meta.seq = row[4].is_null() ? 0 : row[4].as<int64_t>();
        if (!row[5].is_null()) meta.lo = IndexKey{HexDecode(row[5].c_str()), row[6].c_str()};
        meta.members = row[7].is_null() ? 0 : row[7].as<uint64_t>();
        // Unpacked where used; keys that do not unpack are as good as none.
        if (!row[8].is_null()) meta.member_keys = HexDecode(row[8].c_str());
        doc.bucket = meta;
      }
      out->push_back(std::move(doc));
    }
    return Status::Ok();
  }

  void ForgetScan() {
    last_scan_key_.clear();
    last_scan_.clear();
  }

  // Counts one round trip to the server that sent `statements` SQL
  // statements (a multi-statement simple query sends several).
  void Sent(uint64_t statements = 1) {
    ++round_trips_;
    statements_ += statements;
  }

  // Round trips. A statement whose result no caller waits for (a write, a
  // lock, BEGIN) is deferred: queued, and sent in the same round trip as the
  // transaction's next statement that returns rows, or with its COMMIT. The
  // server runs them in order, so a read sees every write before it and
  // runs under every lock taken before it. What a deferred statement's
  // result must show (an epoch, a lock row per key, no clash) is checked by
  // its `check` when the result arrives; a failed check fails the read that
  // carried it, and Commit sends checked statements before COMMIT, never
  // with it, so a refused transaction cannot commit.
  struct Deferred {
    Deferred(std::string what, std::string sql = "",
             std::function<Status(const pqxx::result&)> check = nullptr,
             std::function<Status(const std::exception&)> failed = nullptr,
             bool may_refuse = true)
        : what(std::move(what)), sql(std::move(sql)), check(std::move(check)),
          failed(std::move(failed)), may_refuse(may_refuse) {}
    std::string what;  // for errors: what the statement does
    std::string sql;   // plain SQL, or `execute <prepared>(<literals>)`
    std::function<Status(const pqxx::result&)> check;    // null: none
    std::function<Status(const std::exception&)> failed;  // null: FromPostgresException
    bool may_refuse;  // false: `check` only counts, and may run after COMMIT
  };

  // Queues the prepared statement `sql` with `args` as literals. Preparing
  // it and quoting the literals use the connection, which may be gone: that
  // failure is kept and becomes the transaction's at its next read or
  // commit (the callers return a Status and must not throw).
  template <typename... Args>
  void Defer(Deferred deferred, const std::string& sql, const Args&... args) {
    if (!broken_.ok()) return;
    try {
      deferred.sql = ExecuteText(sql, args...);
    } catch (const std::exception& e) {
      broken_ = FromPostgresException(e, deferred.what);
      return;
    }
    pending_.push_back(std::move(deferred));
  }

  // `execute <name>('<arg>', ...)` of `sql`, prepared on this connection
  // (now, if it was not: EXECUTE names a statement the server knows).
  template <typename... Args>
  std::string ExecuteText(const std::string& sql, const Args&... args) {
    const std::string& name = state_.statements.Name(sql);
    work_.conn().prepare_now(name);
    std::string text = "execute " + name;
    const std::vector<std::string> literals{work_.quote(args)...};
    for (size_t i = 0; i < literals.size(); ++i) text += (i ? ", " : "(") + literals[i];
    if (!literals.empty()) text += ')';
    return text;
  }

  // Sends the deferred statements and then `read` (when not null) in one
  // round trip and checks the deferred results in order. Throws a
  // StatusError for the first deferred statement that failed or was
  // refused by its check (the read's result is then not used), else the
  // read's own exception, or returns the read's result.
  pqxx::result Flush(const std::string* read) {
    if (!broken_.ok()) throw StatusError(broken_);  // a statement could not be queued
    std::vector<Deferred> sent;
    sent.swap(pending_);
    if (sent.empty() && read == nullptr) return pqxx::result();
    const bool commit = !sent.empty() && sent.back().sql == "commit";
    Sent(sent.size() + (read != nullptr ? 1 : 0));
    if (!sent.empty() && sent.front().sql.rfind("begin", 0) == 0) begun_ = true;
    pqxx::pipeline pipe(work_);
    pipe.retain(static_cast<int>(sent.size()) + 2);
    std::vector<pqxx::pipeline::query_id> ids;
    for (const Deferred& deferred : sent) ids.push_back(pipe.insert(deferred.sql));
    const pqxx::pipeline::query_id read_id = read != nullptr ? pipe.insert(*read) : 0;
    Status failure = Status::Ok();
    for (size_t i = 0; i < sent.size(); ++i) {
      try {
        const pqxx::result result = pipe.retrieve(ids[i]);
        if (failure.ok() && sent[i].check) failure = sent[i].check(result);
      } catch (const std::exception& e) {
        if (!failure.ok()) continue;  // not run: an earlier statement failed
        if (commit && dynamic_cast<const pqxx::broken_connection*>(&e) != nullptr) {
          failure = Status::Transient("commit outcome unknown (connection lost during commit): " +
                                      FromPostgresException(e, sent[i].what).message());
        } else {
          failure = sent[i].failed ? sent[i].failed(e) : FromPostgresException(e, sent[i].what);
        }
      }
    }
    if (!failure.ok()) {
      if (read != nullptr) {
        try {
          pipe.retrieve(read_id);
        } catch (...) {  // not run, or its result is not used
        }
      }
      throw StatusError(failure);
    }
    return read != nullptr ? pipe.retrieve(read_id) : pqxx::result();
  }

  // Runs one statement, prepared once per connection (parsed once; see
  // PreparedStatements), with the deferred statements before it, and
  // counts the round trip.
  template <typename... Args>
  pqxx::result Run(const std::string& sql, Args&&... args) {
    // A statement that could not be queued failed the transaction: say why,
    // rather than what preparing this one on the same dead connection says.
    if (!broken_.ok()) throw StatusError(broken_);
    if (!pending_.empty()) {
      const std::string text = ExecuteText(sql, args...);
      return Flush(&text);
    }
    Sent();
    return work_.exec_prepared(state_.statements.Name(sql), std::forward<Args>(args)...);
  }

  pqxx::nontransaction work_;
  Status broken_ = Status::Ok();  // why a statement could not be queued (Defer)
  ConnectionState& state_;
  std::string schema_;
  const ChangeCapture& capture_;
  const uint64_t epoch_;  // the configuration epoch this process runs; 0 = unchecked
  bool journal_ = false;  // an apply is building: journal the source changes
  std::map<EntityKey, EntityRecord> written_;  // by WriteEntities (LoadEntities)
  std::string change_source_;
  LockRowProvisioner provision_;
  uint64_t round_trips_ = 0;
  uint64_t statements_ = 0;
  std::vector<Deferred> pending_;
  std::string last_scan_key_;       // Scan's last question ("": none kept)
  std::vector<Referrer> last_scan_;  // and its answer
  bool begun_ = false;  // BEGIN was sent
  bool ended_ = false;  // COMMIT succeeded
  bool writers_checked_ = true;  // no LockWriters result awaited (journal_ is known)
};

}  // namespace

PreparedStatements::PreparedStatements(pqxx::connection_base& connection)
    : connection_(connection) {}

const std::string& PreparedStatements::Name(const std::string& sql) {
  auto found = names_.find(sql);
  if (found != names_.end()) return found->second;
  std::string name = "denormd_" + std::to_string(names_.size());
  connection_.prepare(name, sql);
  return names_.emplace(sql, std::move(name)).first->second;
}

Status BeginPostgresTransaction(pqxx::connection_base& connection, ConnectionState& state,
                                const std::string& schema, const ChangeCapture& capture,
                                uint64_t epoch, LockRowProvisioner provision,
                                std::unique_ptr<StoreTransaction>* out) {
  return Guard("starting a transaction", [&] {
    *out = std::make_unique<PostgresTransaction>(connection, state, schema, capture, epoch,
                                                 std::move(provision));
  });
}

Status ExecuteInPostgresTransaction(StoreTransaction& txn, const std::string& sql,
                                    std::vector<std::string>* rows) {
  auto* postgres = dynamic_cast<PostgresTransaction*>(&txn);
  if (postgres == nullptr) return Status::Fatal("internal: not a PostgreSQL transaction");
  return postgres->RunStatement(sql, rows);
}

}  // namespace denormd
