#include "connectors/postgres_write_locks.h"

#include <algorithm>
#include <cstdlib>

#include "connectors/postgres_work.h"

namespace denormd {

// Every statement is deferred (sent with the batch's first read); the
// epoch is checked on their result, before any write can commit.
//
// Who runs beside whom: the writers table, locked SHARE by every writer and
// EXCLUSIVE by one alone; the writers' advisory lock (WritersLockId), taken
// exclusively by a writer of any part (LockWriters(false)) and shared by a
// batch alone in its parts; an advisory lock per part (PartLockId), shared by
// a batch of the part and exclusive for one alone in it. A writer takes them
// in that order, the parts by id, so no two writers wait for each other's.
Status PostgresWriteLocks::LockWriters(bool exclusive) {
  if (exclusive) return Join("exclusive", "");
  const std::string writers = std::to_string(WritersLockId(work_.schema()));
  return Join("share", "select pg_advisory_xact_lock(" + writers + ")");
}

Status PostgresWriteLocks::LockWritersOf(const std::vector<std::string>& parts, bool alone) {
  std::vector<int64_t> ids;
  for (const std::string& part : parts) ids.push_back(PartLockId(work_.schema(), part));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::vector<std::string> calls;
  if (alone) {
    calls.push_back("pg_advisory_xact_lock_shared(" +
                    std::to_string(WritersLockId(work_.schema())) + ")");
  }
  for (int64_t id : ids) {
    calls.push_back(std::string(alone ? "pg_advisory_xact_lock(" : "pg_advisory_xact_lock_shared(") +
                    std::to_string(id) + ")");
  }
  std::string sql;
  for (const std::string& call : calls) sql += (sql.empty() ? "select " : ", ") + call;
  return Join("share", sql);
}

int64_t PostgresWriteLocks::WritersLockId(const std::string& quoted_schema) {
  return LockRowId("denormd writers\x1f" + quoted_schema);
}

int64_t PostgresWriteLocks::PartLockId(const std::string& quoted_schema, const std::string& part) {
  return LockRowId("denormd part\x1f" + quoted_schema + '\x1f' + part);
}

// `advisory`: the advisory locks to take after the table's (one select,
// its calls evaluated in order; "": none).
Status PostgresWriteLocks::Join(const char* table_mode, const std::string& advisory) {
  const std::string& schema = work_.schema();
  work_.DeferSql({"joining the writers",
                  std::string("lock table ") + schema + ".writers in " + table_mode + " mode",
                  nullptr, nullptr});
  if (!advisory.empty()) work_.DeferSql({"joining the writers", advisory, nullptr, nullptr});
  work_.AwaitApplying();
  work_.DeferSql(
      {"joining the writers",
       "select coalesce((select value from " + schema + ".meta where key = 'epoch'), '0'),"
       " exists (select 1 from " + schema + ".meta where key = 'applying')",
       [this](const pqxx::result& result) {
         const uint64_t stored = std::strtoull(result[0][0].c_str(), nullptr, 10);
         work_.SetApplying(result[0][1].as<bool>());
         if (epoch_ != 0 && stored != epoch_) {
           return Status::StaleConfig("the projections of schema " + work_.schema() +
                                      " changed to epoch " + std::to_string(stored) +
                                      " (denormd apply) while this process ran epoch " +
                                      std::to_string(epoch_));
         }
         return Status::Ok();
       },
       nullptr});
  return Status::Ok();
}

Status PostgresWriteLocks::LockKeys(const std::vector<std::string>& keys, Mode mode) {
  std::vector<int64_t> ids;
  for (const std::string& key : keys) ids.push_back(LockRowId(key));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.empty()) return Status::Ok();
  // A key is a row of the locks table; its lock is a row lock, which
  // PostgreSQL keeps in the row itself, so a fan-out that locks 100,000
  // documents cannot exhaust the shared lock table. One statement, in key
  // order (so that two waiting writers cannot deadlock), locks the rows
  // that exist and creates the ones that do not: ON CONFLICT DO UPDATE
  // locks the row it meets even when its WHERE updates nothing, and a row
  // another transaction is inserting or deleting (a prune) is waited for,
  // then locked or created. No row can be missing afterwards, whatever a
  // prune removed meanwhile.
  const std::string what = "locking " + std::to_string(ids.size()) + " keys";
  const bool briefly = mode == Mode::kWaitBriefly;
  if (briefly) {
    work_.DeferSql({what, "set local lock_timeout = " + std::to_string(kBriefLockWaitMs)});
  }
  work_.Defer({what, "", nullptr,
               [what, briefly](const std::exception& e) {
                 // Not granted in time: a key is held. Roll back, try again.
                 const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e);
                 if (briefly && sql != nullptr && sql->sqlstate() == "55P03") {
                   return Status::Busy(what + ": a key is held");
                 }
                 return FromPostgresException(e, what);
               }},
              "insert into " + work_.schema() +
                  ".locks (key) select k from unnest($1::bigint[]) k order by k"
                  " on conflict (key) do update set key = excluded.key where false",
              PgBigintArray(ids));
  if (briefly) {
    work_.DeferSql({what, "set local lock_timeout = " + std::to_string(session_lock_timeout_ms_)});
  }
  return Status::Ok();
}

}  // namespace denormd
