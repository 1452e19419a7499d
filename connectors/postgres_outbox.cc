#include "connectors/postgres_outbox.h"

#include <algorithm>
#include <cstdlib>

#include <pqxx/pqxx>

#include "connectors/postgres_sql.h"
#include "connectors/postgres_store.h"

namespace denormd {

namespace {

// A snapshot in which no transaction is visible: nothing is behind a cursor
// whose `through` is empty.
constexpr const char* kNothingVisible = "1:1:";

const std::string& OrNothing(const std::string& snapshot) {
  static const std::string nothing = kNothingVisible;
  return snapshot.empty() ? nothing : snapshot;
}

}  // namespace

struct PostgresOutbox::Connection {
  // The store's connection defaults and session settings (timeouts:
  // a server that vanishes must not block the relay, and with it SIGTERM).
  Connection(const std::string& options, const StoreConfig& store)
      : pq(WithConnectionDefaults(options, store)) {
    // A page is the first rows of the outbox in seq order that a filter
    // keeps: an index scan on seq that stops after them, whatever the
    // backlog. A bitmap scan would visit (and sort) every row of the window
    // for every page; forbid it, and scans of the whole table, here.
    pqxx::nontransaction session(pq);
    session.exec(SessionSettingsSql(store) + "; set enable_bitmapscan = off; set enable_seqscan = off");
  }
  pqxx::connection pq;
};

std::string CursorText(const OutboxCursor& cursor) {
  return cursor.through + "|" + cursor.until + "|" + std::to_string(cursor.after);
}

PostgresOutbox::PostgresOutbox(const Config& config, std::string connection_string)
    : config_(config), connection_string_(std::move(connection_string)) {}

PostgresOutbox::~PostgresOutbox() = default;

void PostgresOutbox::Disconnect() {
  connection_.reset();
  claimed_ = false;
}

Status PostgresOutbox::Connect() {
  if (connection_ && connection_->pq.is_open()) return Status::Ok();
  Disconnect();
  return Guard("connecting to PostgreSQL (feed relay)", [&] {
    connection_ = std::make_unique<Connection>(connection_string_, config_.store);
    schema_ = connection_->pq.quote_name(config_.store.schema);
  });
}

template <typename F>
Status PostgresOutbox::Use(const std::string& what, F&& body) {
  DENORMD_RETURN_IF_ERROR(Connect());
  Status status = Guard(what, [&] {
    pqxx::nontransaction work(connection_->pq);
    body(work);
  });
  if (!status.ok()) Disconnect();
  return status;
}

Status PostgresOutbox::Claim(bool* claimed) {
  if (claimed_ && connection_ && connection_->pq.is_open()) {
    *claimed = true;
    return Status::Ok();
  }
  DENORMD_RETURN_IF_ERROR(Use("claiming the feed relay", [&](pqxx::nontransaction& work) {
    // Session-scoped: held until this connection ends (a crash ends it).
    claimed_ = work.exec_params1("select pg_try_advisory_lock($1)",
                                 LockRowId("denormd feed relay " + config_.store.schema))[0]
                   .as<bool>();
  }));
  *claimed = claimed_;
  return Status::Ok();
}

Status PostgresOutbox::Read(const OutboxCursor& from, size_t max, std::vector<OutboxRow>* rows,
                            OutboxCursor* next) {
  if (!claimed_) return Status::Transient("the feed relay is not claimed");
  OutboxCursor cursor = from;
  const bool had_window = !cursor.until.empty();
  for (int window = 0; window < (had_window ? 2 : 1); ++window) {
    if (cursor.until.empty() || window == 1) {
      if (!cursor.until.empty()) cursor.through = cursor.until;
      DENORMD_RETURN_IF_ERROR(Use("taking a snapshot", [&](pqxx::nontransaction& work) {
        cursor.until = work.exec1("select pg_current_snapshot()::text")[0].c_str();
      }));
      cursor.after = 0;
    }
    DENORMD_RETURN_IF_ERROR(Use("reading the outbox", [&](pqxx::nontransaction& work) {
      // The window's rows in seq order past `after`: the scan walks the
      // primary key from `after` and stops after `max` rows of the window
      // (rows still before the window were pruned; those after it are few:
      // transactions that were open at `until`). Documents are rendered
      // for the rows of the page only.
      pqxx::result result = work.exec_params(
          "with page as (select seq from " + schema_ + ".outbox"
          " where seq > $3 and not pg_visible_in_snapshot(txid, $1::pg_snapshot)"
          " and pg_visible_in_snapshot(txid, $2::pg_snapshot) order by seq limit $4)"
          " select o.seq, o.collection, o.id, o.pk, o.doc::text, o.source,"
          " extract(epoch from o.created_at)::float8 from page join " + schema_ +
          ".outbox o on o.seq = page.seq order by o.seq",
          OrNothing(cursor.through), cursor.until, cursor.after, static_cast<int64_t>(max));
      for (const auto& row : result) {
        OutboxRow out;
        out.seq = row[0].as<int64_t>();
        out.collection = row[1].c_str();
        out.id = row[2].c_str();
        if (!row[3].is_null()) out.pk = row[3].c_str();
        if (!row[4].is_null()) out.doc = row[4].c_str();
        out.source = row[5].c_str();
        out.captured_at = row[6].as<double>();
        rows->push_back(std::move(out));
      }
    }));
    if (!rows->empty()) {
      cursor.after = rows->back().seq;
      break;
    }
  }
  *next = cursor;
  return Status::Ok();
}

Status PostgresOutbox::Prune(const OutboxCursor& published, uint64_t sequence) {
  if (!claimed_) return Status::Transient("the feed relay is not claimed");
  const std::string& until = published.until.empty() ? OrNothing("") : published.until;
  return Use("pruning the outbox", [&](pqxx::nontransaction& work) {
    // One range of the txid index: every row behind the cursor has a txid
    // below the larger xmax of its two snapshots.
    work.exec_params(
        "with d as (delete from " + schema_ + ".outbox where"
        " txid < greatest(pg_snapshot_xmax($1::pg_snapshot), pg_snapshot_xmax($2::pg_snapshot))"
        " and (pg_visible_in_snapshot(txid, $1::pg_snapshot)"
        " or (pg_visible_in_snapshot(txid, $2::pg_snapshot) and seq <= $3)))"
        " insert into " + schema_ + ".feed_state (relay, sequence, cursor, published_at)"
        " values ($4, $5, $6, clock_timestamp()) on conflict (relay) do update set"
        " sequence = excluded.sequence, cursor = excluded.cursor, published_at = excluded.published_at",
        OrNothing(published.through), until, published.after, config_.feed->transactional_id,
        static_cast<int64_t>(sequence), CursorText(published));
  });
}

Status PostgresOutbox::CheckProgress(const OutboxCursor& published, uint64_t sequence,
                                     std::string* problem) {
  problem->clear();
  if (!claimed_) return Status::Transient("the feed relay is not claimed");
  for (const std::string* snapshot : {&published.through, &published.until}) {
    if (snapshot->empty()) continue;
    // pg_snapshot's text form: xmin:xmax:xip,... (digits, colons, commas).
    const bool well_formed =
        snapshot->find_first_not_of("0123456789:,") == std::string::npos &&
        std::count(snapshot->begin(), snapshot->end(), ':') == 2;
    if (!well_formed) {
      *problem = "its cursor holds \"" + snapshot->substr(0, 64) + "\", not a snapshot of the store";
      return Status::Ok();
    }
  }
  return Use("checking the feed's progress", [&](pqxx::nontransaction& work) {
    // The store's view: the transaction ids handed out so far, and the
    // sequence recorded at the last prune (none before the first).
    pqxx::row row = work.exec_params1(
        "select pg_snapshot_xmax(pg_current_snapshot())::text,"
        " greatest(pg_snapshot_xmax($1::pg_snapshot), pg_snapshot_xmax($2::pg_snapshot))::text,"
        " (select sequence from " + schema_ + ".feed_state where relay = $3)",
        OrNothing(published.through), OrNothing(published.until), config_.feed->transactional_id);
    const uint64_t now = std::strtoull(row[0].c_str(), nullptr, 10);
    const uint64_t cursor = std::strtoull(row[1].c_str(), nullptr, 10);
    if (cursor > now) {
      *problem = "its cursor was taken at transaction " + std::to_string(cursor) +
                 ", after every transaction the store has begun (" + std::to_string(now) +
                 "): it is another store's, or forged";
    } else if (!row[2].is_null() && sequence < row[2].as<uint64_t>()) {
      *problem = "its sequence " + std::to_string(sequence) + " is behind the " + row[2].c_str() +
                 " the store recorded as published (an older or another feed's record)";
    }
  });
}

Status PostgresOutbox::Lag(OutboxLag* out) {
  return Use("measuring the outbox", [&](pqxx::nontransaction& work) {
    pqxx::row row = work.exec1(
        "select count(*), coalesce(extract(epoch from clock_timestamp() - (select created_at from " +
        schema_ + ".outbox order by seq limit 1))::float8, 0) from " + schema_ + ".outbox");
    out->rows = row[0].as<uint64_t>();
    out->oldest_seconds = row[1].as<double>();
  });
}

}  // namespace denormd
