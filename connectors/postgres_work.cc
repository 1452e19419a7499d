#include "connectors/postgres_work.h"

#include <algorithm>
#include <cstdlib>

namespace denormd {

std::string JsonText(const rapidjson::StringBuffer& buffer) {
  return std::string(buffer.GetString(), buffer.GetSize());
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

PostgresWork::PostgresWork(pqxx::connection_base& connection, ConnectionState& state,
                           const std::string& schema, const ChangeCapture& capture,
                           const IndexCounting& counting)
    : work_(connection),
      connection_state_(state),
      schema_(QuoteIdentifier(schema)),
      capture_(capture),
      counting_(counting) {
  // BEGIN goes with the transaction's first statements.
  pending_.push_back({"starting a transaction", "begin", nullptr, nullptr});
}

PostgresWork::~PostgresWork() {
  if (!begun_ || ended_) return;
  try {
    work_.exec("rollback");
  } catch (...) {
  }
}

std::string PostgresWork::Table(const ProjectionConfig& projection) {
  return schema_ + "." + QuoteIdentifier(projection.collection);
}

bool PostgresWork::Captured(const ProjectionConfig& projection) const {
  return capture_.published.count(projection.collection) > 0;
}

bool PostgresWork::CapturedWithPk(const ProjectionConfig& projection) const {
  return Captured(projection) && capture_.partitioned.count(projection.collection) > 0;
}

std::string PostgresWork::CaptureCte(const std::string& rows, int first) const {
  return "y as (insert into " + schema_ + ".outbox (collection, id, pk, doc, source)"
         " select $" + std::to_string(first) + "::text, f.id, f.pk, f.doc, $" +
         std::to_string(first + 1) + "::text from " + rows + " f order by f.id, f.k)";
}

Status PostgresWork::Applying(bool* applying) {
  if (!applying_known_) DENORMD_RETURN_IF_ERROR(SendDeferred("joining the writers"));
  *applying = applying_;
  return Status::Ok();
}

Status PostgresWork::ListStrings(const std::string& what, const std::string& sql,
                                 const std::string& a, const std::string& after, size_t limit,
                                 std::vector<std::string>* out) {
  pqxx::result rows;
  DENORMD_RETURN_IF_ERROR(Guard(what, [&] {
    rows = Run(sql, a, after, static_cast<int64_t>(limit));
  }));
  for (const auto& row : rows) out->push_back(row[0].c_str());
  return Status::Ok();
}

Status PostgresWork::SendDeferred(const std::string& what) {
  if (pending_.empty() && broken_.ok()) return Status::Ok();
  return Guard(what, [&] { Flush(nullptr); });
}

Status PostgresWork::Execute(const std::string& sql, std::vector<std::string>* rows) {
  IndexWritten();
  return Guard("executing SQL", [&] {
    if (!pending_.empty()) Flush(nullptr);
    Sent();
    RowsAsText(work_.exec(sql), rows);
  });
}

// Before the transaction's first statement: its BEGIN says so.
Status PostgresWork::PinReadSnapshot() {
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

Status PostgresWork::Commit() {
  const bool checked = std::any_of(pending_.begin(), pending_.end(), [](const Deferred& d) {
    return d.check != nullptr && d.may_refuse;
  });
  if (checked) DENORMD_RETURN_IF_ERROR(SendDeferred("committing"));
  pending_.push_back({"committing", "commit", nullptr, nullptr});
  DENORMD_RETURN_IF_ERROR(SendDeferred("committing"));
  ended_ = true;
  return Status::Ok();
}

void PostgresWork::Queue(Deferred deferred) {
  pending_bytes_ += deferred.sql.size();
  pending_.push_back(std::move(deferred));
  if (pending_bytes_ < kSendQueuedAtBytes || !broken_.ok()) return;
  const std::string what = pending_.back().what;
  Status sent = Guard(what, [&] { Flush(nullptr); });
  if (!sent.ok()) broken_ = sent;
}

pqxx::result PostgresWork::Flush(const std::string* read) {
  if (!broken_.ok()) throw StatusError(broken_);  // a statement could not be queued
  std::vector<Deferred> sent;
  sent.swap(pending_);
  pending_bytes_ = 0;
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

}  // namespace denormd
