#include "connectors/postgres_write_locks.h"

#include <algorithm>
#include <cstdlib>

#include "connectors/postgres_work.h"

namespace denormd {

// Both statements are deferred (sent with the batch's first read); the
// epoch is checked on their result, before any write can commit.
Status PostgresWriteLocks::LockWriters(bool exclusive) {
  const std::string& schema = work_.schema();
  work_.DeferSql({"joining the writers",
                  std::string("lock table ") + schema + ".writers in " +
                      (exclusive ? "exclusive" : "share") + " mode",
                  nullptr, nullptr});
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
  // documents cannot exhaust the shared lock table. Missing rows are
  // created by a separate autocommit connection: inserting them here would
  // make this transaction wait for another one's uncommitted insert.
  const std::string nowait = mode == Mode::kNoWait ? " nowait" : "";
  std::unordered_set<int64_t>& known = work_.lock_rows();
  std::vector<int64_t> unknown;
  for (int64_t id : ids) {
    if (!known.count(id)) unknown.push_back(id);
  }
  // The keys are locked in one statement, in key order, so that two
  // waiting writers cannot deadlock: every row must exist first. Creating
  // them is a round trip of the transaction's too.
  if (!unknown.empty()) {
    work_.Sent();
    DENORMD_RETURN_IF_ERROR(provision_(PgBigintArray(unknown)));
  }
  if (known.size() > (4u << 20)) known.clear();
  known.insert(ids.begin(), ids.end());
  // Deferred: sent with the next read, which runs after the locks are
  // held (or fails with them). A row missing from the result was pruned
  // since this process last saw it, and so, most likely, were the others
  // it remembers: a prune removes every lock row no batch holds. All are
  // forgotten, so that the retry of the batch and the batches after it
  // create their rows again; forgetting only this batch's would fail the
  // next batches one after another (a soak measured a retry every few
  // seconds for minutes after each prune).
  const std::string what = "locking " + std::to_string(ids.size()) + " keys";
  work_.Defer({what,
               "",
               [this, ids](const pqxx::result& rows) {
                 if (rows.size() == ids.size()) return Status::Ok();
                 work_.lock_rows().clear();
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
              "select key from " + work_.schema() +
                  ".locks where key = any($1::bigint[]) order by key for update" + nowait,
              PgBigintArray(ids));
  return Status::Ok();
}

}  // namespace denormd
