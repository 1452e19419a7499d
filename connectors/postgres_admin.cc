#include "connectors/postgres_admin.h"

#include <algorithm>
#include <iterator>
#include <optional>

#include <pqxx/pqxx>

#include "connectors/postgres_connection.h"
#include "connectors/postgres_sql.h"
#include "connectors/postgres_transaction.h"

namespace denormd {

namespace {

// A live row `l` and a built row `s` are the same document (a pk that
// changed makes another document).
constexpr const char* kSameDocument =
    " l.projection = s.projection and l.id = s.id and coalesce(l.pk, '') = coalesce(s.pk, '')";

// Not AppendStringLiteral (postgres_sql.h), which throws for a NUL byte: these
// literals are built outside Guard (SwitchModel, dropping built tables), in
// functions that return a Status.
std::string Literal(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// "(type, field) in (...)" over index rows, false for an empty list.
std::string RelationCondition(const std::vector<RelationName>& relations) {
  if (relations.empty()) return "false";
  std::string list;
  for (const RelationName& relation : relations) {
    list += (list.empty() ? "" : ", ") + std::string("(") + Literal(relation.first) + ", " +
            Literal(relation.second) + ")";
  }
  return "(type, field) in (" + list + ")";
}

}  // namespace

StoreFactory PostgresStores(const std::string& conninfo) {
  return [conninfo](const Config& config) -> std::unique_ptr<StoreAdministration> {
    return std::make_unique<PostgresStore>(config, conninfo);
  };
}

Status PostgresStore::Summarize(StoreSummary* out) {
  DENORMD_RETURN_IF_ERROR(Connect());
  const std::vector<std::string> collections = config_.CollectionNames();
  Status lane_error;
  DENORMD_RETURN_IF_ERROR(Guard("reading the status", [&] {
    pqxx::read_transaction work(connection_->pq);
    const std::string s = work.quote_name(config_.store.schema);
    for (const auto& row : work.exec_params(
             "select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace"
             " where n.nspname = $1 and c.relkind = 'r' and (right(c.relname, 6) = '__next' or"
             " right(c.relname, 6) = '__plan') and obj_description(c.oid, 'pg_class') = $2"
             " order by 1",
             config_.store.schema, std::string(kOwnershipMark))) {
      out->leftover_tables.push_back(row[0].c_str());
    }
    for (const auto& row : work.exec("select source, partition, position, applied, stale, dead,"
                                     " array_to_json(lane)::text from " + s +
                                     ".positions order by source, partition, lane")) {
      StoredPosition position;
      position.at = {row[0].c_str(), row[1].as<int32_t>(), row[2].as<int64_t>()};
      position.applied = row[3].as<uint64_t>();
      position.stale = row[4].as<uint64_t>();
      position.dead = row[5].as<uint64_t>();
      if (lane_error.ok()) lane_error = TextArrayFromJson(row[6].c_str(), &position.lane);
      out->positions.push_back(std::move(position));
    }
    for (const std::string& collection : collections) {
      // The file's collections: the store may run another model (`status`
      // with an old or a new file) that lacks some.
      const std::string table = s + "." + work.quote_name(collection);
      if (work.exec_params1("select to_regclass($1) is null", table)[0].as<bool>()) continue;
      auto row = work.exec1("select count(*) from " + table);
      out->documents.emplace_back(collection, row[0].as<uint64_t>());
    }
    for (const auto& row : work.exec("select type, count(*) filter (where not deleted),"
                                     " count(*) filter (where deleted) from " + s +
                                     ".entities group by type order by type")) {
      out->entities.emplace_back(row[0].c_str(), row[1].as<uint64_t>());
      out->tombstones += row[2].as<uint64_t>();
    }
    out->dead_letters = work.exec1("select count(*) from " + s + ".dead_letters")[0].as<uint64_t>();
    if (!config_.feed) return;
    out->feed = true;
    auto lag = work.exec1("select count(*), coalesce(extract(epoch from clock_timestamp() -"
                          " (select created_at from " + s + ".outbox order by seq limit 1)), 0)"
                          " from " + s + ".outbox");
    out->outbox.rows = lag[0].as<uint64_t>();
    out->outbox.oldest_seconds = lag[1].as<double>();
    pqxx::result state = work.exec_params(
        "select relay, sequence, extract(epoch from clock_timestamp() - published_at) from " + s +
            ".feed_state where relay = $1",
        config_.feed->transactional_id);
    if (!state.empty()) {
      out->feed_relay = state[0][0].c_str();
      out->feed_sequence = state[0][1].as<uint64_t>();
      out->feed_published_seconds_ago = state[0][2].as<double>();
    }
  }));
  return lane_error;
}

Status PostgresStore::Prune(const RetentionConfig& retention, size_t chunk_rows,
                            PruneReport* report,
                            const std::function<void(const PruneReport&)>& progress,
                            const std::function<bool()>& stop) {
  DENORMD_RETURN_IF_ERROR(Connect());
  // Every chunk commits, and a batch may be waiting for its rows: without
  // waiting for the WAL flush, it lets go sooner. A chunk lost to a crash
  // removed rows the next prune removes again.
  DENORMD_RETURN_IF_ERROR(Guard("pruning", [&] {
    pqxx::nontransaction(connection_->pq).exec("set synchronous_commit = off");
  }));
  struct RestoreCommitDurability {
    pqxx::connection& pq;
    ~RestoreCommitDurability() {
      try {
        if (pq.is_open()) pqxx::nontransaction(pq).exec("reset synchronous_commit");
      } catch (const std::exception&) {
        // The connection broke: the next Connect opens another.
      }
    }
  } restore{connection_->pq};
  const std::string s = QuoteIdentifier(config_.store.schema);
  const std::string limit = std::to_string(std::max<size_t>(chunk_rows, 1));
  const std::string lock_row_limit =
      std::to_string(std::max<size_t>(std::min(chunk_rows, kLockRowsPerChunk), 1));
  const auto stopped = [&] { return stop && stop(); };
  const auto told = [&] {
    if (progress) progress(*report);
  };
  // Runs `sql` (one chunk: returns the chunk's last key columns, then the
  // number of rows removed) from the start of the key space until a chunk
  // comes back empty. `key_columns` is how many key columns the statement
  // takes as $1.. and returns first.
  const auto sweep = [&](const std::string& what, const std::string& sql, size_t key_columns,
                         uint64_t* removed) -> Status {
    std::vector<std::optional<std::string>> after(key_columns);  // null: from the start
    while (!stopped()) {
      bool done = false;
      DENORMD_RETURN_IF_ERROR(Guard(what, [&] {
        pqxx::nontransaction work(connection_->pq);
        pqxx::row row = key_columns == 1   ? work.exec_params1(sql, after[0])
                        : key_columns == 2 ? work.exec_params1(sql, after[0], after[1])
                                           : work.exec_params1(sql, after[0], after[1], after[2]);
        if (row[0].is_null()) {
          done = true;  // nothing left to look at
          return;
        }
        for (size_t i = 0; i < key_columns; ++i) after[i] = row[static_cast<int>(i)].c_str();
        *removed += row[static_cast<int>(key_columns)].as<uint64_t>();
      }));
      told();
      if (done) break;
    }
    return Status::Ok();
  };

  if (retention.tombstone_hours > 0) {
    // In key order, a chunk of entities at a time (no index on age: one
    // would make every update of an entity a non-HOT update).
    DENORMD_RETURN_IF_ERROR(sweep(
        "pruning tombstones",
        "with c as (select type, id from " + s + ".entities where $1::text is null or (type, id)"
        " > ($1, $2) order by type, id limit " + limit + "),"
        " doomed as (select e.type, e.id from " + s + ".entities e join c using (type, id)"
        " where e.deleted and e.updated_at < now() - make_interval(hours => " +
            std::to_string(retention.tombstone_hours) + ") for update of e skip locked),"
        " gone as (delete from " + s + ".entities e using doomed d"
        " where e.type = d.type and e.id = d.id returning 1)"
        " select l.type, l.id, (select count(*) from gone) from (select 1) one left join"
        " (select type, id from c order by type desc, id desc limit 1) l on true",
        2, &report->tombstones));
  }
  if (retention.dead_letter_days > 0 || retention.max_dead_letters > 0) {
    std::vector<std::string> rules;
    if (retention.dead_letter_days > 0) {
      rules.push_back("d.received_at < now() - make_interval(days => " +
                      std::to_string(retention.dead_letter_days) + ")");
    }
    if (retention.max_dead_letters > 0) {
      rules.push_back("d.seq <= (select seq from " + s + ".dead_letters order by seq desc offset " +
                      std::to_string(retention.max_dead_letters) + " limit 1)");
    }
    std::string rule = rules[0];
    if (rules.size() > 1) rule = "(" + rules[0] + " or " + rules[1] + ")";
    DENORMD_RETURN_IF_ERROR(sweep(
        "pruning dead letters",
        "with c as (select seq from " + s + ".dead_letters where ($1::bigint is null or seq > $1)"
        " order by seq limit " + limit + "),"
        " gone as (delete from " + s + ".dead_letters d using c where d.seq = c.seq and " +
            rule + " returning 1)"
        " select (select max(seq) from c), (select count(*) from gone)",
        1, &report->dead_letters));
  }
  DENORMD_RETURN_IF_ERROR(sweep(
      "pruning lock rows",
      "with c as (select key from " + s + ".locks where ($1::bigint is null or key > $1)"
      " order by key limit " + lock_row_limit + "),"
      " doomed as (select l.key from " + s + ".locks l join c using (key)"
      " for update of l skip locked),"
      " gone as (delete from " + s + ".locks l using doomed d where l.key = d.key returning 1)"
      " select (select max(key) from c), (select count(*) from gone)",
      1, &report->lock_rows));
  DENORMD_RETURN_IF_ERROR(sweep(
      "pruning zero counts",
      "with c as (select type, field, target from " + s + ".ref_counts where $1::text is null or"
      " (type, field, target) > ($1, $2, $3) order by type, field, target limit " + limit + "),"
      " doomed as (select r.type, r.field, r.target from " + s + ".ref_counts r"
      " join c using (type, field, target) where r.count = 0 for update of r skip locked),"
      " gone as (delete from " + s + ".ref_counts r using doomed d where r.type = d.type"
      " and r.field = d.field and r.target = d.target returning 1)"
      " select l.type, l.field, l.target, (select count(*) from gone) from (select 1) one"
      " left join (select * from c order by type desc, field desc, target desc limit 1) l on true",
      3, &report->zero_counts));
  if (stopped()) return Status::Ok();
  return ClearStaleApply(&report->stale_apply_cleared, &report->stale_journal_rows);
}

Status PostgresStore::LockAdministration(const std::string& command,
                                         std::unique_ptr<AdministrationLock>* out) {
  return PostgresAdministrationLock::Acquire(config_, connection_string_, command, out);
}

Status PostgresStore::AdministrationLocked(bool* held) {
  return PostgresAdministrationLock::IsHeld(config_, connection_string_, held);
}

std::string PostgresStore::Table(const std::string& collection) const {
  return QuoteIdentifier(config_.store.schema) + "." + QuoteIdentifier(collection);
}

Status PostgresStore::MarkApplying(const std::string& applying) {
  const std::string s = QuoteIdentifier(config_.store.schema);
  return Execute("lock table " + s + ".writers in exclusive mode;"
                 " delete from " + s + ".apply_journal;"
                 " insert into " + s + ".meta (key, value) values ('applying', " +
                 Literal(applying) + ") on conflict (key) do update"
                 " set value = excluded.value");
}

Status PostgresStore::AbandonApply(uint64_t* journal_rows) {
  DENORMD_RETURN_IF_ERROR(Connect());
  uint64_t removed = 0;
  DENORMD_RETURN_IF_ERROR(Guard("clearing an interrupted apply's mark", [&] {
    pqxx::work work(connection_->pq);
    const std::string s = work.quote_name(config_.store.schema);
    work.exec("lock table " + s + ".writers in exclusive mode");
    // Read again under the lock: an apply that finished meanwhile removed it.
    if (work.exec("select 1 from " + s + ".meta where key = 'applying'").empty()) return;
    for (const auto& row : work.exec_params(
             "select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace"
             " where n.nspname = $1 and c.relkind = 'r' and right(c.relname, 6) = '__next'"
             " and obj_description(c.oid, 'pg_class') = $2",
             config_.store.schema, std::string(kOwnershipMark))) {
      work.exec("drop table " + s + "." + work.quote_name(row[0].c_str()));
    }
    removed = work.exec("delete from " + s + ".apply_journal").affected_rows();
    work.exec("delete from " + s + ".meta where key = 'applying'");
    work.commit();
  }));
  if (journal_rows != nullptr) *journal_rows = removed;
  return Status::Ok();
}

Status PostgresStore::DropBuiltCollections(const std::string& suffix) {
  std::vector<std::string> tables;
  DENORMD_RETURN_IF_ERROR(Execute(
      "select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace"
      " where n.nspname = " + Literal(config_.store.schema) + " and c.relkind = 'r'"
      " and right(c.relname, " + std::to_string(suffix.size()) + ") = " + Literal(suffix) +
          " and obj_description(c.oid, 'pg_class') = " + Literal(kOwnershipMark),
      &tables));
  // Only those that carry denormd's mark of ownership (checked again as
  // each is dropped); any other stays.
  std::string sql;
  for (const std::string& table : tables) {
    const std::string name = Literal(Table(table));
    sql += "do $$ begin if obj_description(to_regclass(" + name + "), 'pg_class') = " +
           Literal(kOwnershipMark) + " then execute 'drop table ' || " + name +
           "; end if; end $$;";
  }
  return sql.empty() ? Status::Ok() : Execute(sql);
}

Status PostgresStore::RemoveRelationsExcept(const std::vector<RelationName>& kept) {
  const std::string s = QuoteIdentifier(config_.store.schema);
  const std::string keep = RelationCondition(kept);
  return Execute("delete from " + s + ".refs where not " + keep + "; delete from " + s +
                 ".ref_counts where not " + keep + ";");
}

Status PostgresStore::RemoveRelations(const std::vector<RelationName>& dropped) {
  if (dropped.empty()) return Status::Ok();
  const std::string s = QuoteIdentifier(config_.store.schema);
  const std::string gone = RelationCondition(dropped);
  return Execute("delete from " + s + ".refs where " + gone + "; delete from " + s +
                 ".ref_counts where " + gone);
}

Status PostgresStore::CompareBuilt(const std::string& collection, const std::string& suffix,
                                   BuiltComparison* out) {
  DENORMD_RETURN_IF_ERROR(Connect());
  *out = BuiltComparison();
  const std::string live = Table(collection), built = Table(collection + suffix);
  // In a transaction of its own, rolled back: it only reads.
  return Guard("counting what apply changes", [&] {
    pqxx::work work(connection_->pq);
    const bool exists = work.exec1("select to_regclass(" + Literal(live) + ") is not null")[0]
                            .as<bool>();
    const std::string join = kSameDocument;
    pqxx::row row =
        exists ? work.exec1("select count(*) filter (where l.id is null or l.doc is distinct from"
                            " s.doc), count(*) filter (where l.id is not null and l.doc = s.doc),"
                            " count(l.id), (select count(*) from " + live + ")"
                            " from " + built + " s left join " + live + " l on" + join)
               : work.exec1("select count(*), 0, 0, 0 from " + built);
    out->written = row[0].as<uint64_t>();
    out->unchanged = row[1].as<uint64_t>();
    out->matched = row[2].as<uint64_t>();
    out->live = row[3].as<uint64_t>();
  });
}

Status PostgresStore::CountDocuments(const std::string& collection, uint64_t* out) {
  DENORMD_RETURN_IF_ERROR(Connect());
  *out = 0;
  return Guard("counting documents", [&] {
    pqxx::work work(connection_->pq);
    const std::string table = Table(collection);
    if (!work.exec1("select to_regclass(" + Literal(table) + ") is not null")[0].as<bool>()) return;
    *out = work.exec1("select count(*) from " + table)[0].as<uint64_t>();
  });
}

Status PostgresStore::SwitchModel(StoreTransaction& txn, const ModelSwitch& change,
                                  bool* switched) {
  *switched = false;
  const std::string schema = QuoteIdentifier(config_.store.schema);
  // The change feed: the documents the switch writes or deletes in a
  // published collection go to the outbox like a batch's (when the store
  // has one), so that a consumer mirroring the collection follows the switch.
  std::string sql;
  const std::string source = Literal(change.capture_source);
  for (const std::string& collection : change.captured) {
    const std::string live = Table(collection), built = Table(collection + change.suffix);
    const std::string join = kSameDocument;
    const std::string insert = " insert into " + schema +
                               ".outbox (collection, id, pk, doc, source) select " +
                               Literal(collection) + ", ";
    // A new collection: every document is new.
    sql += "do $$ begin if to_regclass(" + Literal(schema + ".outbox") + ") is null then"
           " return; end if; if to_regclass(" + Literal(live) + ") is null then" +
           insert + "s.id, s.pk, s.doc, " + source + " from " + built + " s; else" +
           insert + "s.id, s.pk, s.doc, " + source + " from " + built + " s left join " + live +
           " l on" + join + " where l.id is null or l.doc is distinct from s.doc;" +
           insert + "l.id, l.pk, null, " + source + " from " + live +
           " l where not exists (select 1 from " + built + " s where" + join + ");"
           " end if; end $$;";
  }
  for (const std::string& collection : change.dropped) {
    sql += "drop table if exists " + Table(collection) + ";";
  }
  for (const std::string& collection : change.rebuilt) {
    sql += "drop table if exists " + Table(collection) + ";";
    sql += "alter table " + Table(collection + change.suffix) + " rename to " + QuoteIdentifier(collection) +
           ";";
    std::vector<const char*> indexes(std::begin(kCollectionIndexSuffixes),
                                     std::end(kCollectionIndexSuffixes));
    indexes.insert(indexes.end(), std::begin(kSharedCollectionIndexSuffixes),
                   std::end(kSharedCollectionIndexSuffixes));
    for (const char* index : indexes) {
      sql += "alter index if exists " + schema + "." + QuoteIdentifier(collection + change.suffix + index) +
             " rename to " + QuoteIdentifier(collection + index) + ";";
    }
  }
  // Compare and set: the switch is only from the epoch the apply read.
  std::vector<std::string> moved;
  DENORMD_RETURN_IF_ERROR(ExecuteInPostgresTransaction(
      txn,
      "update " + schema + ".meta set value = " + Literal(std::to_string(change.from_epoch + 1)) +
          " where key = 'epoch' and value = " + Literal(std::to_string(change.from_epoch)) +
          " returning value",
      &moved));
  if (moved.size() != 1) return Status::Ok();
  sql += "insert into " + schema + ".meta (key, value) values"
         " ('model', " + Literal(change.model_yaml) + "),"
         " ('model_fingerprint', " + Literal(change.model_fingerprint) + "),"
         " ('index', " + Literal(change.index_fingerprint) + ")"
         " on conflict (key) do update set value = excluded.value;"
         " delete from " + schema + ".meta where key = 'applying';";
  DENORMD_RETURN_IF_ERROR(ExecuteInPostgresTransaction(txn, sql, nullptr));
  *switched = true;
  return Status::Ok();
}

struct PostgresAdministrationLock::Connection {
  Connection(const std::string& options, const StoreConfig& store)
      : pq(WithConnectionDefaults(options, store)) {
    pqxx::nontransaction session(pq);
    session.exec(SessionSettingsSql(store));
  }
  pqxx::connection pq;
};

int64_t PostgresAdministrationLock::Key(const std::string& schema) {
  return LockRowId("denormd apply " + schema);
}

Status PostgresAdministrationLock::Acquire(const Config& config, const std::string& conninfo,
                                   const std::string& command,
                                   std::unique_ptr<AdministrationLock>* out) {
  DENORMD_RETURN_IF_ERROR(CheckConnectionString(conninfo));
  std::unique_ptr<PostgresAdministrationLock> lock(new PostgresAdministrationLock());
  lock->schema_ = config.store.schema;
  bool taken = false;
  DENORMD_RETURN_IF_ERROR(Guard("taking the administration lock", [&] {
    lock->connection_ = std::make_unique<Connection>(conninfo, config.store);
    pqxx::nontransaction work(lock->connection_->pq);
    taken = work.exec_params1("select pg_try_advisory_lock($1)", Key(config.store.schema))[0]
                .as<bool>();
  }));
  if (!taken) return AdministrationBusy(config, command);
  *out = std::move(lock);
  return Status::Ok();
}

PostgresAdministrationLock::~PostgresAdministrationLock() = default;

Status PostgresAdministrationLock::IsHeld(const Config& config, const std::string& conninfo,
                                          bool* held) {
  std::unique_ptr<AdministrationLock> lock;
  Status status = Acquire(config, conninfo, "status", &lock);
  *held = status.IsBusy();
  return status.IsBusy() ? Status::Ok() : status;
}

Status PostgresAdministrationLock::Check() {
  const Status lost = Status::Fatal(
      "lost the administration lock of schema " + schema_ +
      " (its connection to PostgreSQL ended; another command may hold it now): stopped "
      "without switching anything");
  if (!connection_ || !connection_->pq.is_open()) return lost;
  bool held = false;
  Status status = Guard("checking the administration lock", [&] {
    pqxx::nontransaction work(connection_->pq);
    held = work.exec_params1("select exists (select 1 from pg_locks where locktype = 'advisory'"
                             " and pid = pg_backend_pid() and granted and classid = $1::oid"
                             " and objid = $2::oid)",
                             static_cast<int64_t>((static_cast<uint64_t>(Key(schema_)) >> 32) &
                                                  0xffffffffu),
                             static_cast<int64_t>(static_cast<uint64_t>(Key(schema_)) &
                                                  0xffffffffu))[0]
               .as<bool>();
  });
  // The connection is not reopened: a new session would not hold the lock.
  if (!status.ok() || !held) {
    connection_.reset();
    return lost;
  }
  return Status::Ok();
}

}  // namespace denormd
