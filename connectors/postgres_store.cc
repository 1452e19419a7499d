#include "connectors/postgres_store.h"

#include "common/text.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

#include <libpq-fe.h>
#include <pqxx/pqxx>

#include "common/redact.h"
#include "connectors/postgres_connection.h"
#include "connectors/postgres_reference_index.h"
#include "connectors/postgres_sql.h"
#include "connectors/postgres_transaction.h"
#include "projections/projection_plan.h"

namespace denormd {

std::string PostgresConnectionString(const Config& config) {
  const char* env = std::getenv("DENORMD_POSTGRES");
  if (env != nullptr && *env != '\0') return env;
  return config.store.postgres;
}

namespace {

bool SharedCollection(const Config& config, const std::string& collection) {
  for (const ProjectionConfig& projection : config.projections) {
    if (projection.collection == collection && projection.shared_collection) return true;
  }
  return false;
}

bool IsUrl(const std::string& conninfo) {
  return conninfo.rfind("postgresql://", 0) == 0 || conninfo.rfind("postgres://", 0) == 0;
}

}  // namespace

std::string WithConnectionDefaults(const std::string& conninfo, const StoreConfig& store) {
  const std::vector<std::pair<std::string, std::string>> defaults = {
      {"connect_timeout", std::to_string(store.connect_timeout_s)},
      {"keepalives", "1"},
      {"keepalives_idle", "10"},
      {"keepalives_interval", "5"},
      {"keepalives_count", "3"},
      {"tcp_user_timeout", "25000"},
  };
  std::string out = conninfo;
  const bool url = IsUrl(conninfo);
  for (const auto& setting : defaults) {
    if (conninfo.find(setting.first + "=") != std::string::npos) continue;
    if (url) {
      out += (out.find('?') == std::string::npos ? "?" : "&") + setting.first + "=" + setting.second;
    } else {
      out += (out.empty() ? "" : " ") + setting.first + "=" + setting.second;
    }
  }
  return out;
}

std::string SessionSettingsSql(const StoreConfig& store) {
  return "set statement_timeout = " + std::to_string(store.statement_timeout_ms) +
         "; set lock_timeout = " + std::to_string(store.lock_timeout_ms) +
         "; set standard_conforming_strings = on"
         // The server's side of the same socket: a backend whose client
         // vanished (a network partition) ends within about 25 s and releases
         // the locks of its open transaction, instead of holding them for the
         // kernel's two hours while the reconnected daemon waits on them.
         "; set tcp_keepalives_idle = 10; set tcp_keepalives_interval = 5"
         "; set tcp_keepalives_count = 3; set tcp_user_timeout = 25000";
}

namespace {

// Whether `schema`.meta has the layout denormd gives it, (key text primary
// key, value text), and holds what denormd records first (the index
// fingerprint or the model's epoch): a denormd store of a release before the
// mark of ownership.
bool LooksLikeDenormdMeta(pqxx::transaction_base& work, const std::string& schema) {
  const std::string columns =
      work.exec_params1("select coalesce(string_agg(column_name || ' ' || data_type, ', '"
                        " order by ordinal_position), '') from information_schema.columns"
                        " where table_schema = $1 and table_name = 'meta'",
                        schema)[0]
          .c_str();
  if (columns != "key text, value text") return false;
  return work.exec("select exists (select 1 from " + work.quote_name(schema) +
                   ".meta where key in ('index', 'epoch'))")[0][0]
      .as<bool>();
}

// Of `relations` (schema-qualified, quoted), those that exist without
// denormd's mark of ownership, by name.
std::vector<std::string> ForeignRelations(pqxx::transaction_base& work,
                                          const std::vector<std::string>& relations) {
  std::vector<std::string> foreign;
  for (const auto& row : work.exec_params(
           "select c.relname from unnest($1::text[]) r join pg_class c on c.oid = to_regclass(r)"
           " where obj_description(c.oid, 'pg_class') is distinct from $2 order by 1",
           PgTextArray(relations), std::string(kOwnershipMark))) {
    foreign.push_back(row[0].c_str());
  }
  return foreign;
}

}  // namespace

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
      counting_(IndexCountingOf(ProjectionPlan(config))),
      connection_string_(std::move(connection_string)) {}

PostgresStore::~PostgresStore() = default;

Status CheckConnectionString(const std::string& conninfo) {
  const std::string what = "the PostgreSQL connection string cannot be used: ";
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    std::string message = error != nullptr ? error : "libpq could not parse it";
    if (error != nullptr) PQfreemem(error);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
    return Status::InvalidInput(what + RedactSecrets(message));
  }
  static const std::vector<std::string> kSslModes = {"disable", "allow",     "prefer",
                                                     "require", "verify-ca", "verify-full"};
  std::string problem;
  for (const PQconninfoOption* option = options; option->keyword != nullptr; ++option) {
    if (option->val == nullptr || *option->val == '\0') continue;
    const std::string keyword = option->keyword;
    const std::string value = option->val;
    if (keyword == "port") {
      // A list, one per host; an empty entry means the default.
      size_t start = 0;
      while (problem.empty() && start <= value.size()) {
        size_t end = value.find(',', start);
        if (end == std::string::npos) end = value.size();
        const std::string port = value.substr(start, end - start);
        const bool digits = !port.empty() && port.size() <= 5 &&
                            std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (!port.empty() && (!digits || std::stoi(port) > 65535)) {
          problem = "port \"" + port + "\" is not a port number";
        }
        start = end + 1;
      }
    } else if (keyword == "sslmode" &&
               std::find(kSslModes.begin(), kSslModes.end(), value) == kSslModes.end()) {
      problem = "sslmode \"" + value + "\" is none of disable, allow, prefer, require, verify-ca, "
                "verify-full";
    }
  }
  PQconninfoFree(options);
  return problem.empty() ? Status::Ok() : Status::InvalidInput(what + RedactSecrets(problem));
}

Status PostgresStore::Connect() {
  if (connection_ && connection_->pq.is_open()) return Status::Ok();
  // A connection string libpq cannot use is a mistake, not an outage: it
  // fails the start (exit 2) instead of being retried.
  DENORMD_RETURN_IF_ERROR(CheckConnectionString(connection_string_));
  connection_.reset();
  backend_pid_.store(0);
  return Guard("connecting to PostgreSQL", [&] {
    connection_ = std::make_unique<Connection>(connection_string_, config_.store);
    backend_pid_.store(connection_->pq.backendpid());
  });
}

Status PostgresStore::Open(OpenMode mode) {
  const bool allow_stale_index = mode != OpenMode::kRunsThisModel;
  const std::string model_fingerprint = ModelFingerprint(config_);
  // The model first: a file the store does not run must not create its
  // collections (a collection `apply` removed would come back, empty).
  DENORMD_RETURN_IF_ERROR(ReadModel(&model_));
  const bool other_model = model_.epoch != 0 && model_.fingerprint != model_fingerprint;
  if (other_model && mode == OpenMode::kRunsThisModel) {
    epoch_ = model_.epoch;
    return StaleModelError(config_, model_);
  }
  DENORMD_RETURN_IF_ERROR(CreateTables(/*with_collections=*/!other_model || mode == OpenMode::kBuild));
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
    // The model this store runs: recorded by the first start (or a store
    // older than `denormd apply`), changed only by apply and rebuild.
    work.exec_params("insert into " + s + ".meta (key, value) values ('model', $1),"
                     " ('model_fingerprint', $2), ('epoch', '1') on conflict (key) do nothing",
                     config_.model_yaml, model_fingerprint);
    work.commit();
  }));
  DENORMD_RETURN_IF_ERROR(ReadModel(&model_));
  epoch_ = model_.epoch;
  // Recorded between the two reads by another process's first start.
  if (model_.fingerprint != model_fingerprint && mode == OpenMode::kRunsThisModel) {
    return StaleModelError(config_, model_);
  }
  if (stored == fingerprint || allow_stale_index) return Status::Ok();
  return StaleIndexError(config_);
}

Status PostgresStore::ReadModel(StoredModel* out) {
  DENORMD_RETURN_IF_ERROR(Connect());
  *out = StoredModel();
  std::vector<std::string> foreign;
  bool older_denormd = false;
  DENORMD_RETURN_IF_ERROR(Guard("reading the stored configuration", [&] {
    pqxx::read_transaction work(connection_->pq);
    const std::string s = work.quote_name(config_.store.schema);
    // A schema not created yet has no model (epoch 0).
    if (work.exec_params1("select to_regclass($1) is null", s + ".meta")[0].as<bool>()) return;
    // A meta table that is not denormd's is not read.
    if (!ForeignRelations(work, {s + ".meta"}).empty()) {
      std::vector<std::string> relations;
      for (const auto& relation : OwnedRelations(config_.CollectionNames())) {
        relations.push_back(s + "." + work.quote_name(relation.first));
      }
      foreign = ForeignRelations(work, relations);
      older_denormd = LooksLikeDenormdMeta(work, config_.store.schema);
      return;
    }
    for (const auto& row : work.exec("select key, value from " + s + ".meta where key in"
                                     " ('model', 'model_fingerprint', 'epoch', 'applying')")) {
      const std::string key = row[0].c_str();
      if (key == "model") out->yaml = row[1].c_str();
      if (key == "model_fingerprint") out->fingerprint = row[1].c_str();
      if (key == "epoch") out->epoch = std::strtoull(row[1].c_str(), nullptr, 10);
      if (key == "applying") out->applying = row[1].c_str();
    }
  }));
  return foreign.empty() ? Status::Ok() : ForeignTablesError(foreign, older_denormd);
}

Status PostgresStore::RecordModel() {
  DENORMD_RETURN_IF_ERROR(Connect());
  const std::string fingerprint = ModelFingerprint(config_);
  bool moved = false;
  DENORMD_RETURN_IF_ERROR(Guard("recording the configuration", [&] {
    pqxx::work work(connection_->pq);
    const std::string s = work.quote_name(config_.store.schema);
    // Alone: no batch of the old configuration is between its epoch check
    // and its commit.
    work.exec("lock table " + s + ".writers in exclusive mode");
    // Compare and set: only from the epoch Open read (another apply or
    // rebuild may have changed the model since).
    moved = work.exec_params("select 1 from " + s + ".meta where key = 'epoch' and value = $1",
                             std::to_string(epoch_))
                .empty();
    if (moved) return;
    work.exec_params("update " + s + ".meta set value = (value::bigint + 1)::text"
                     " where key = 'epoch' and exists (select 1 from " + s + ".meta"
                     " where key = 'model_fingerprint' and value <> $1)", fingerprint);
    work.exec_params("insert into " + s + ".meta (key, value) values ('model', $1),"
                     " ('model_fingerprint', $2) on conflict (key) do update"
                     " set value = excluded.value", config_.model_yaml, fingerprint);
    work.commit();
  }));
  if (moved) return ModelMovedError(config_, epoch_);
  DENORMD_RETURN_IF_ERROR(ReadModel(&model_));
  epoch_ = model_.epoch;
  return Status::Ok();
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

std::vector<std::pair<std::string, bool>> PostgresStore::OwnedRelations(
    const std::vector<std::string>& collections) const {
  std::vector<std::pair<std::string, bool>> out;  // (unquoted name, is an index)
  for (const char* table : {"entities", "refs", "ref_counts", "positions", "locks", "meta",
                            "writers", "dead_letters", "apply_journal", "fanout_stats"}) {
    out.emplace_back(table, false);
  }
  out.emplace_back("refs_by_owner", true);
  if (config_.feed) {
    out.emplace_back("outbox", false);
    out.emplace_back("feed_state", false);
    out.emplace_back("outbox_by_txid", true);
  }
  for (const std::string& collection : collections) {
    out.emplace_back(collection, false);
    for (const char* index : kCollectionIndexSuffixes) out.emplace_back(collection + index, true);
    if (!SharedCollection(config_, collection)) continue;
    for (const char* index : kSharedCollectionIndexSuffixes) {
      out.emplace_back(collection + index, true);
    }
  }
  return out;
}

Status PostgresStore::ForeignTablesError(const std::vector<std::string>& foreign,
                                         bool older_denormd) const {
  std::string names;
  for (const std::string& name : foreign) names += (names.empty() ? "" : ", ") + name;
  if (older_denormd) {
    return Status::InvalidInput(
        "schema " + config_.store.schema + " holds tables of denormd's names without its mark "
        "of ownership (" + names + "): a store made by a denormd older than the mark, or "
        "tables of another application. If it is a denormd store, run `" + CommandName() + " adopt -c " +
        config_.path + "` once to mark them as denormd's; denormd uses nothing else");
  }
  return Status::InvalidInput(
      "schema " + config_.store.schema + " holds tables denormd did not create (" + names +
      "); denormd neither uses nor drops them: set store.schema to a schema of its own, or "
      "move them away");
}

namespace {

// Autovacuum settings of the tables whose rows churn: the reference index and
// its counters (a row per reference, rewritten as references move), the lock
// table (a row per key written, removed by every prune) and the outbox (every
// row deleted once published). PostgreSQL's defaults vacuum a table once 20 %
// of its rows are dead, throttled. In the benchmark's soak (bench/run.py
// --soak-minutes, docs/benchmarks.md) the reference index grew throughout a
// trial with the defaults and levelled off with these: vacuum after 1 % dead
// rows (at least 1,000), unthrottled, the TOAST tables too. Tables created by
// an older release keep their settings: docs/architecture.md ("In
// production") has the ALTER TABLE that gives them these.
const char* const kChurnTableStorage =
    " with (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,"
    " autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0.02,"
    " toast.autovacuum_vacuum_scale_factor = 0.01, toast.autovacuum_vacuum_threshold = 1000,"
    " toast.autovacuum_vacuum_cost_delay = 0)";

}  // namespace

Status PostgresStore::CreateTables(bool with_collections) {
  DENORMD_RETURN_IF_ERROR(Connect());
  const std::vector<std::string> collections =
      with_collections ? config_.CollectionNames() : std::vector<std::string>();
  const std::vector<std::pair<std::string, bool>> owned = OwnedRelations(collections);
  std::vector<std::string> relations;  // schema-qualified, quoted
  std::vector<std::string> foreign;    // of those that exist, the ones without the mark
  bool older_denormd = false;
  // Fast path: everything exists. CREATE INDEX IF NOT EXISTS takes a share
  // lock on its table even when the index exists, which would make a start
  // wait for (and stall) the batches of running instances.
  bool complete = false;
  DENORMD_RETURN_IF_ERROR(Guard("checking the schema", [&] {
    pqxx::nontransaction work(connection_->pq);
    const std::string s = work.quote_name(config_.store.schema) + ".";
    for (const auto& relation : owned) relations.push_back(s + work.quote_name(relation.first));
    // And the newest column of the collections (added by one ALTER with the
    // other bucket columns): a table from an older release gains it.
    std::vector<std::string> collection_tables;
    for (const std::string& collection : collections) {
      collection_tables.push_back(s + work.quote_name(collection));
    }
    // And the positions' lane column (a store of a release before lanes).
    complete = work.exec_params1("select (select count(*) from unnest($1::text[]) r"
                                 " where to_regclass(r) is null)"
                                 " + (select count(*) from unnest($2::text[]) t where not exists"
                                 " (select 1 from pg_attribute a where a.attrelid = to_regclass(t)"
                                 " and a.attname = 'member_keys' and not a.attisdropped))"
                                 " + (select count(*) where not exists (select 1 from pg_attribute a"
                                 " where a.attrelid = to_regclass($3) and a.attname = 'lane'"
                                 " and not a.attisdropped))",
                                 PgTextArray(relations), PgTextArray(collection_tables),
                                 s + "positions")[0]
                   .as<int>() == 0;
    // Ownership: every relation of denormd's names that exists must carry
    // its mark (a comment), else it is someone else's.
    foreign = ForeignRelations(work, relations);
    if (!foreign.empty()) {
      // denormd's meta table of a release before the mark: (key, value) with
      // the model's epoch recorded.
      older_denormd = std::find(foreign.begin(), foreign.end(), "meta") != foreign.end() &&
                      LooksLikeDenormdMeta(work, config_.store.schema);
    }
  }));
  if (!foreign.empty()) return ForeignTablesError(foreign, older_denormd);
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
              " id text collate \"C\" not null, primary key (type, field, target, sort, id))" +
              kChurnTableStorage);
    // An entity's own rows (a reindex, verify) by (type, id), and its rows
    // naming one target. A batch deletes a row by its whole key; with an
    // index on (type, id) alone PostgreSQL may choose it over the primary
    // key and read every row the entity owns to delete one, and an entity
    // can own one row per linked entity (the rows kept through a link: an
    // author of 20,000 books owns 20,000), which made deleting one cost what
    // the linked set holds. With the target, the rows it reads are the few
    // the entity owns naming that target. (Not the whole key: at the
    // benchmark's full size that index was as large as the primary key,
    // 305 MB against 316, every page of it written as the rows move.)
    work.exec("create index if not exists refs_by_owner on " + s + ".refs (type, id, target)");
    // The (type, id) index of a store made before refs_by_owner (on refs,
    // whose mark was checked, so ours, marked or not), superseded by it.
    if (work.exec_params1("select exists (select 1 from pg_index where indexrelid ="
                          " to_regclass($1) and indrelid = to_regclass($2))",
                          s + ".refs_by_entity", s + ".refs")[0]
            .as<bool>()) {
      work.exec("drop index " + s + ".refs_by_entity");
    }
    work.exec("create table if not exists " + s +
              ".ref_counts (type text collate \"C\" not null, field text collate \"C\" not null,"
              " target text collate \"C\" not null, count bigint not null,"
              " primary key (type, field, target))" + kChurnTableStorage);
    // A row per stream and lane (projections/lanes.h): `lane` holds the
    // entity types whose records the row counts ("" for records of no
    // type); {} is every type (one lane, and every row of a release before
    // lanes, whose table gains the column and the wider key here).
    work.exec("create table if not exists " + s +
              ".positions (source text not null, partition integer not null,"
              " lane text[] collate \"C\" not null default '{}',"
              " position bigint not null, applied bigint not null default 0,"
              " stale bigint not null default 0, dead bigint not null default 0,"
              " updated_at timestamptz not null default now(),"
              " primary key (source, partition, lane))");
    work.exec("alter table " + s + ".positions add column if not exists lane text[] collate \"C\""
              " not null default '{}'");
    if (work.exec_params1("select array_length(indkey, 1) from pg_index where indrelid ="
                          " to_regclass($1) and indisprimary", s + ".positions")[0]
            .as<int>() != 3) {
      const std::string key = work.exec_params1(
          "select conname from pg_constraint where conrelid = to_regclass($1) and contype = 'p'",
          s + ".positions")[0].c_str();
      work.exec("alter table " + s + ".positions drop constraint " + work.quote_name(key) +
                ", add primary key (source, partition, lane)");
    }
    work.exec("create table if not exists " + s + ".locks (key bigint primary key)" + kChurnTableStorage);
    work.exec("create table if not exists " + s + ".writers (note text)");
    work.exec("create table if not exists " + s +
              ".meta (key text primary key, value text not null)");
    // The changes batches write while `denormd apply` builds (its catch-up
    // input; empty otherwise).
    work.exec("create table if not exists " + s +
              ".apply_journal (seq bigserial primary key, type text not null,"
              " id text not null, before jsonb, after jsonb)");
    // What changes cost, per hour, entity type and field (FanOutStat).
    work.exec("create table if not exists " + s +
              ".fanout_stats (hour timestamptz not null, type text not null, field text not null,"
              " changes bigint not null, documents bigint not null, max_documents bigint not null,"
              " max_id text not null, primary key (hour, type, field))");
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
                " created_at timestamptz not null default clock_timestamp())" +
                kChurnTableStorage);
      work.exec("create index if not exists outbox_by_txid on " + s + ".outbox (txid)");
      work.exec("create table if not exists " + s +
                ".feed_state (relay text primary key, sequence bigint not null,"
                " cursor text not null, published_at timestamptz not null)");
    }
    for (const std::string& collection : collections) {
      const std::string table = s + "." + work.quote_name(collection);
      // Bucket documents also keep where they sit in their group: seq (what
      // readers page by), number (of the id), the first member's key (lo),
      // the member count and their keys (member_keys, which a batch splices
      // instead of reading the index; null: read the index); other documents
      // leave these null. Columns are added to older tables as they are
      // found (nullable, so without rewriting the table).
      // A collection several projections write is keyed on (pk, id), as in
      // the article's model (an id is unique within its partition); any
      // other on id.
      const bool shared = SharedCollection(config_, collection);
      work.exec("create table if not exists " + table + " (id text collate \"C\" " +
                (shared ? "not null" : "primary key") +
                ", doc jsonb not null, pk text collate \"C\", projection text not null)");
      if (shared) {
        work.exec("create unique index if not exists " + work.quote_name(collection + "_key") +
                  " on " + table + " ((coalesce(pk, '')), id)");
        // A document's id without its partition key (a batch moving a
        // document to another key, loading or deleting documents by id):
        // the key's second column cannot find it without reading the
        // whole key.
        work.exec("create index if not exists " + work.quote_name(collection + "_by_id") +
                  " on " + table + " (id)");
      }
      work.exec("alter table " + table +
                " add column if not exists seq bigint, add column if not exists number bigint,"
                " add column if not exists lo_sort bytea,"
                " add column if not exists lo_id text collate \"C\","
                " add column if not exists members integer,"
                " add column if not exists member_keys bytea");
      work.exec("create index if not exists " + work.quote_name(collection + "_by_pk") + " on " +
                table + " (projection, pk)");
      work.exec("create index if not exists " + work.quote_name(collection + "_by_lo") + " on " +
                table + " (projection, pk, lo_sort, lo_id) where lo_sort is not null");
      work.exec("create index if not exists " + work.quote_name(collection + "_by_seq") + " on " +
                table + " (pk, seq) where seq is not null");
      work.exec("create index if not exists " + work.quote_name(collection + "_by_number") +
                " on " + table + " (projection, pk, number) where number is not null");
    }
    // The mark of ownership on what was just created (everything of
    // denormd's names that existed already carries it: checked above).
    for (const auto& row : work.exec_params(
             "select r from unnest($1::text[]) r where obj_description(to_regclass(r), 'pg_class')"
             " is null", PgTextArray(relations))) {
      const std::string relation = row[0].c_str();
      bool index = false;
      for (size_t i = 0; i < relations.size(); ++i) {
        if (relations[i] == relation) index = owned[i].second;
      }
      work.exec(std::string("comment on ") + (index ? "index " : "table ") + relation + " is " +
                work.quote(std::string(kOwnershipMark)));
    }
    work.commit();
  });
}

Status PostgresStore::Adopt(std::vector<std::string>* adopted) {
  DENORMD_RETURN_IF_ERROR(Connect());
  const std::vector<std::string> collections = config_.CollectionNames();
  const std::vector<std::pair<std::string, bool>> owned = OwnedRelations(collections);
  std::string refusal;
  std::vector<std::string> marked;
  DENORMD_RETURN_IF_ERROR(Guard("adopting the schema", [&] {
    pqxx::work work(connection_->pq);
    const std::string& schema = config_.store.schema;
    const std::string s = work.quote_name(schema);
    work.exec("select pg_advisory_xact_lock(" +
              std::to_string(LockRowId("denormd schema " + schema)) + ")");
    if (work.exec_params1("select to_regclass($1) is null", s + ".meta")[0].as<bool>()) {
      refusal = "schema " + schema + " has no meta table: there is no denormd store to adopt";
      return;
    }
    if (!LooksLikeDenormdMeta(work, schema)) {
      refusal = "schema " + schema + "'s meta table is not denormd's (columns key text, value "
                "text, with an index fingerprint or epoch recorded): nothing adopted";
      return;
    }
    for (const std::string& collection : collections) {
      const std::string table = s + "." + work.quote_name(collection);
      pqxx::row row = work.exec_params1(
          "select to_regclass($1) is not null, (select count(*) from pg_attribute a where"
          " a.attrelid = to_regclass($1) and a.attname in ('id', 'doc', 'pk', 'projection')"
          " and not a.attisdropped)",
          table);
      if (row[0].as<bool>() && row[1].as<int>() != 4) {
        refusal = "table " + schema + "." + collection + " is not a denormd collection (it lacks "
                  "the columns id, doc, pk, projection): nothing adopted";
        return;
      }
    }
    for (const auto& relation : owned) {
      const std::string name = s + "." + work.quote_name(relation.first);
      pqxx::row row = work.exec_params1(
          "select to_regclass($1) is not null, obj_description(to_regclass($1), 'pg_class')",
          name);
      if (!row[0].as<bool>()) continue;
      if (row[1].is_null()) {
        work.exec(std::string("comment on ") + (relation.second ? "index " : "table ") + name +
                  " is " + work.quote(std::string(kOwnershipMark)));
        marked.push_back(relation.first);
      } else if (row[1].c_str() != std::string(kOwnershipMark)) {
        refusal = schema + "." + relation.first + " carries a comment that is not denormd's "
                  "mark: nothing adopted";
        return;
      }
    }
    work.commit();
  }));
  if (!refusal.empty()) return Status::InvalidInput(refusal);
  if (adopted != nullptr) *adopted = marked;
  return Status::Ok();
}

Status PostgresStore::Begin(std::unique_ptr<StoreTransaction>* out) {
  DENORMD_RETURN_IF_ERROR(Connect());
  return BeginPostgresTransaction(
      connection_->pq, connection_->state, config_.store.schema, capture_, counting_, epoch_,
      config_.store.lock_timeout_ms, out);
}

Status PostgresStore::CancelRunningStatement() {
  const int pid = backend_pid_.load();
  if (pid == 0) return Status::Ok();
  return Guard("cancelling the running statement", [&] {
    pqxx::connection canceller(WithConnectionDefaults(connection_string_, config_.store));
    pqxx::nontransaction(canceller).exec(SessionSettingsSql(config_.store));
    pqxx::nontransaction work(canceller);
    work.exec_params("select pg_cancel_backend($1)", pid);
  });
}

Status PostgresStore::Execute(const std::string& sql, std::vector<std::string>* rows) {
  DENORMD_RETURN_IF_ERROR(Connect());
  return Guard("executing SQL", [&] {
    pqxx::work work(connection_->pq);
    pqxx::result result = work.exec(sql);
    work.commit();
    RowsAsText(result, rows);
  });
}

}  // namespace denormd
