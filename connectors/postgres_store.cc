#include "connectors/postgres_store.h"

#include <cstdlib>

#include <pqxx/pqxx>

#include "connectors/postgres_sql.h"
#include "connectors/postgres_transaction.h"
#include "projections/projection_plan.h"

namespace denormd {

std::string PostgresConnectionString(const Config& config) {
  const char* env = std::getenv("DENORMD_POSTGRES");
  if (env != nullptr && *env != '\0') return env;
  return config.store.postgres;
}

struct PostgresStore::Connection {
  explicit Connection(const std::string& options) : pq(options), state(pq) {
    // Every statement of the engine is a keyed lookup or a range of one key,
    // for which an index nested loop is the right plan at any table size.
    // Tables that grow fast (a first load) have statistics minutes old, with
    // which the planner picks scans and hash joins that cost seconds (a
    // 200,000-event load took 277 s instead of 21 s); forbid those for the
    // session (which also keeps the prepared statements' plans on indexes).
    //
    // Documents and entity data larger than ~2 kB are compressed in TOAST.
    // lz4 (PostgreSQL 14+, when built with it) compresses about twice as fast
    // as the default pglz: a bucket rewrite of 237 documents of 100 comments
    // took 31 ms instead of 70 ms. Values already stored keep their method.
    pqxx::nontransaction session(pq);
    session.exec("set enable_seqscan = off; set enable_hashjoin = off;"
                 " set enable_mergejoin = off;"
                 " select set_config('default_toast_compression', 'lz4', false) from pg_settings"
                 " where name = 'default_toast_compression' and 'lz4' = any(enumvals)");
  }
  pqxx::connection pq;
  ConnectionState state;
};

namespace {

ChangeCapture CaptureOf(const Config& config) {
  ChangeCapture capture;
  for (const std::string& collection : config.PublishedCollections()) {
    capture.published.insert(collection);
    if (config.HasPartitionKey(collection)) capture.partitioned.insert(collection);
  }
  return capture;
}

}  // namespace

PostgresStore::PostgresStore(const Config& config, std::string connection_string)
    : config_(config),
      capture_(CaptureOf(config)),
      connection_string_(std::move(connection_string)) {}

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
    if (config_.feed) {
      for (const char* table : {"outbox", "outbox_by_txid", "feed_state"}) {
        relations.push_back(s + table);
      }
    }
    for (const std::string& collection : collections) {
      relations.push_back(s + work.quote_name(collection));
      for (const char* index : {"_by_pk", "_by_lo", "_by_seq", "_by_number"}) {
        relations.push_back(s + work.quote_name(collection + index));
      }
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
              std::to_string(LockRowId("denormd schema " + config_.store.schema)) + ")");
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
    // The change feed's outbox (docs/architecture.md, "The change feed"):
    // seq orders the changes of one document as they committed; txid (the
    // writing transaction) tells the relay which rows a snapshot shows.
    // created_at is the capture time (clock_timestamp: the statement's
    // moment, not the transaction's start).
    if (config_.feed) {
      work.exec("create table if not exists " + s +
                ".outbox (seq bigserial primary key,"
                " txid xid8 not null default pg_current_xact_id(),"
                " collection text not null, id text not null, pk text, doc jsonb,"
                " source text not null default '',"
                " created_at timestamptz not null default clock_timestamp())");
      work.exec("create index if not exists outbox_by_txid on " + s + ".outbox (txid)");
      work.exec("create table if not exists " + s +
                ".feed_state (relay text primary key, sequence bigint not null,"
                " cursor text not null, published_at timestamptz not null)");
    }
    for (const std::string& collection : collections) {
      const std::string table = s + "." + work.quote_name(collection);
      // Bucket documents also keep where they sit in their group: seq (what
      // readers page by), number (of the id), the first member's key (lo)
      // and the member count; other documents leave these null.
      work.exec("create table if not exists " + table +
                " (id text collate \"C\" primary key, doc jsonb not null, pk text collate \"C\","
                " projection text not null)");
      work.exec("alter table " + table +
                " add column if not exists seq bigint, add column if not exists number bigint,"
                " add column if not exists lo_sort bytea,"
                " add column if not exists lo_id text collate \"C\","
                " add column if not exists members integer");
      work.exec("create index if not exists " + work.quote_name(collection + "_by_pk") + " on " +
                table + " (projection, pk)");
      work.exec("create index if not exists " + work.quote_name(collection + "_by_lo") + " on " +
                table + " (projection, pk, lo_sort, lo_id) where lo_sort is not null");
      work.exec("create index if not exists " + work.quote_name(collection + "_by_seq") + " on " +
                table + " (pk, seq) where seq is not null");
      work.exec("create index if not exists " + work.quote_name(collection + "_by_number") +
                " on " + table + " (projection, pk, number) where number is not null");
    }
    work.commit();
  });
}

Status PostgresStore::Begin(std::unique_ptr<StoreTransaction>* out) {
  DENORMD_RETURN_IF_ERROR(Connect());
  return BeginPostgresTransaction(
      connection_->pq, connection_->state, config_.store.schema, capture_,
      [this](const std::string& key_array) { return ProvisionLockRows(key_array); }, out);
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
