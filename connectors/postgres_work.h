// PostgresWork: what the roles of one PostgresTransaction share. Each role
// is an object of its own, in a file of its own (postgres_source_rows.h,
// postgres_reference_index.h, postgres_document_tables.h,
// postgres_bucket_tables.h, postgres_stream_ledger.h, postgres_write_locks.h);
// all of them send their statements through this one object, so that they
// run in order in one server transaction and share its round trips:
//   - the server transaction, and the statements it sends: a statement whose
//     result nobody waits for is deferred and goes with the next read or
//     with COMMIT ("Round trips" at Deferred), and every round trip and
//     statement is counted;
//   - the schema and the change capture (which collections' document
//     changes go to the outbox, and under which change source);
//   - what the writers' statement (WriteLocks::LockWriters) learns: whether
//     `denormd apply` is building, so that SourceRows journals for it;
//   - how often this transaction wrote index rows, so that a role may keep a
//     read of the index (ReferenceIndex::Scan) until the next write.
//
// Owned by its PostgresTransaction, which destroys its roles first; the
// connection, its ConnectionState and the ChangeCapture must outlive it.
// Destroyed before COMMIT, it rolls back what it sent. Not thread-safe.
#ifndef DENORMD_CONNECTORS_POSTGRES_WORK_H_
#define DENORMD_CONNECTORS_POSTGRES_WORK_H_

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "config/config.h"
#include "connectors/postgres_sql.h"
#include "connectors/postgres_transaction_context.h"
#include "projections/json.h"
#include "projections/json_writer.h"

namespace denormd {

// The text of a JSON parameter written into `buffer`.
std::string JsonText(const rapidjson::StringBuffer& buffer);

// An entity's version and data as a result holds them (NULL: none).
std::optional<uint64_t> ParseVersion(const pqxx::field& field);
Status ParseData(const pqxx::field& field, JsonPtr* out);

class PostgresWork {
 public:
  // Starts the transaction on `connection`; its BEGIN goes with the first
  // statements sent. Throws what libpqxx throws (BeginPostgresTransaction
  // guards it).
  PostgresWork(pqxx::connection_base& connection, ConnectionState& state,
               const std::string& schema, const ChangeCapture& capture,
               const IndexCounting& counting);
  // Rolls back what was sent and not committed. A broken connection has
  // nothing left to roll back (and is not reopened: PostgresStore opens the
  // connection with reactivation off).
  ~PostgresWork();
  PostgresWork(const PostgresWork&) = delete;
  PostgresWork& operator=(const PostgresWork&) = delete;

  // ---- Names

  // The schema, quoted for SQL.
  const std::string& schema() const { return schema_; }
  // The condition on (type, field) of the index rows that move counters.
  const std::string& counted_rows() const { return counting_.counted_rows; }
  // The table of `projection`'s collection, schema-qualified and quoted.
  std::string Table(const ProjectionConfig& projection);

  // ---- Change capture (DocumentTables in projections/store.h)

  // Whether the document changes of `projection`'s collection go to the
  // outbox, and whether that collection has a partition key.
  bool Captured(const ProjectionConfig& projection) const;
  bool CapturedWithPk(const ProjectionConfig& projection) const;
  // "y as (insert into <schema>.outbox ...)": the changes `rows` (a
  // subquery of id, pk, doc and k, the order within one id) captured in the
  // outbox, with the collection in parameter $<first> and the change source
  // in the next one. Their seqs follow (id, k): a pk change's delete comes
  // before the new document.
  std::string CaptureCte(const std::string& rows, int first = 3) const;
  // What this transaction's document changes are attributed to (the
  // parameter after the collection's); "" until set.
  const std::string& change_source() const { return change_source_; }
  void SetChangeSource(const std::string& source) { change_source_ = source; }

  // ---- Facts the roles share

  // Whether `denormd apply` is building, as the writers' statement found
  // it: awaited from when that statement is queued (AwaitApplying) until
  // its result arrives (SetApplying). Applying sends the deferred
  // statements first when the answer is still awaited.
  void AwaitApplying() { applying_known_ = false; }
  void SetApplying(bool applying) {
    applying_ = applying;
    applying_known_ = true;
  }
  Status Applying(bool* applying);

  // Counts a write of index rows (by any role, or by SQL run with
  // Execute): a read of the index kept from before it is stale.
  void IndexWritten() { ++index_writes_; }
  uint64_t index_writes() const { return index_writes_; }
  // Counts a write of documents of `collection` (by DocumentTables or
  // BucketTables): a read of them kept from before it is stale. SQL run
  // with Execute counts as a write of every collection.
  void DocumentsWritten(const std::string& collection) { ++document_writes_[collection]; }
  uint64_t document_writes(const std::string& collection) const {
    auto it = document_writes_.find(collection);
    return index_writes_ + (it == document_writes_.end() ? 0 : it->second);
  }

  // Sends the deferred statements now, in one round trip, and checks their
  // results (nothing to send: Ok): before COMMIT, for the writers'
  // statement's answer, or for a read queued ahead (postgres_read_ahead.h).
  Status SendDeferred(const std::string& what);

  // ---- Round trips

  // A statement whose result no caller waits for (a write, a lock, BEGIN)
  // is deferred: queued, and sent in the same round trip as the
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
    Queue(std::move(deferred));
  }

  // Queues `deferred` with its plain SQL as it is (not prepared).
  void DeferSql(Deferred deferred) { Queue(std::move(deferred)); }

  // The queued statements' text is sent, with no read, once it reaches this
  // many bytes: one round trip more for a batch that large, and what the
  // round trip holds at once (the statements, libpqxx's pipeline joining
  // them, libpq's output buffer, which never shrinks) stays this size
  // rather than the batch's (a batch of 5,000 comments at the full size
  // sent 21 MB of bucket documents in one round trip; docs/benchmarks.md,
  // "Memory: one round trip's text").
  static constexpr size_t kSendQueuedAtBytes = 4 << 20;

  // Runs one statement, prepared once per connection (parsed once; see
  // PreparedStatements), with the deferred statements before it, and
  // counts the round trip. Throws (call it inside Guard).
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
    return work_.exec_prepared(connection_state_.statements.Name(sql),
                               std::forward<Args>(args)...);
  }

  // Runs `sql` (a query of one text column, over $1 = `a`, $2 = `after`,
  // $3 = `limit`) and appends the column to *out.
  Status ListStrings(const std::string& what, const std::string& sql, const std::string& a,
                     const std::string& after, size_t limit, std::vector<std::string>* out);

  // Runs one plain SQL statement after the deferred ones, its rows as text
  // (RowsAsText). It may write anything: it counts as an index write.
  Status Execute(const std::string& sql, std::vector<std::string>* rows);

  // Counts one round trip to the server that sent `statements` SQL
  // statements (a multi-statement simple query sends several).
  void Sent(uint64_t statements = 1) {
    ++round_trips_;
    statements_ += statements;
  }
  uint64_t round_trips() const { return round_trips_; }
  uint64_t statements() const { return statements_; }

  // ---- The transaction's ends

  // Makes the transaction a read-only snapshot: its BEGIN, sent alone.
  // Fails (Fatal) after the first statement was sent.
  Status PinReadSnapshot();
  // COMMIT goes with the deferred statements, unless one of them has a
  // check that can refuse the transaction: those are sent and checked first,
  // since a check runs on the result, after the server executed the rest.
  // (The positions' fence is the server's own: it fails the statement.)
  Status Commit();

 private:
  // `execute <name>('<arg>', ...)` of `sql`, prepared on this connection
  // (now, if it was not: EXECUTE names a statement the server knows).
  template <typename... Args>
  std::string ExecuteText(const std::string& sql, const Args&... args) {
    const std::string& name = connection_state_.statements.Name(sql);
    work_.conn().prepare_now(name);
    std::string text = "execute " + name;
    // Room for every literal, so that appending them never moves the text.
    size_t size = text.size() + 2;
    ((size += LiteralSizeHint(args)), ...);
    text.reserve(size);
    const char* separator = "(";
    (AppendLiteral(&text, &separator, args), ...);
    if (sizeof...(args) > 0) text += ')';
    return text;
  }

  // Appends `arg` as an SQL literal after *separator. A string (a batch's
  // rows as JSON: megabytes) is escaped as it is appended
  // (AppendStringLiteral); pqxx's quote() would also copy it (to_string),
  // escape it into a buffer of twice its size, shift it right by the
  // opening quote and copy the literal again (perf: quoting was 12.8 % of
  // the daemon's CPU).
  template <typename T>
  void AppendLiteral(std::string* text, const char** separator, const T& arg) {
    *text += *separator;
    *separator = ", ";
    if constexpr (std::is_same_v<T, std::string>) {
      AppendStringLiteral(arg, text);
    } else {
      *text += work_.quote(arg);
    }
  }
  // About the size of `arg`'s literal: a string's, with room for a few
  // doubled quotes; a number's or a NULL's.
  template <typename T>
  static size_t LiteralSizeHint(const T& arg) {
    if constexpr (std::is_same_v<T, std::string>) {
      return arg.size() + arg.size() / 64 + 4;
    } else {
      return 32;
    }
  }

  // Appends `deferred` to the queue, and sends the queue when its text
  // reached kSendQueuedAtBytes. A failure of that send (a statement refused
  // by its check, the connection lost) is kept like a statement that could
  // not be queued: it becomes the transaction's at its next read or commit.
  void Queue(Deferred deferred);

  // Sends the deferred statements and then `read` (when not null) in one
  // round trip and checks the deferred results in order. Throws a
  // StatusError for the first deferred statement that failed or was
  // refused by its check (the read's result is then not used), else the
  // read's own exception, or returns the read's result.
  pqxx::result Flush(const std::string* read);

  pqxx::nontransaction work_;
  Status broken_ = Status::Ok();  // why a statement could not be queued (Defer)
  ConnectionState& connection_state_;
  std::string schema_;
  const ChangeCapture& capture_;
  const IndexCounting& counting_;
  std::string change_source_;
  bool applying_ = false;        // an apply is building: journal the source changes
  bool applying_known_ = true;   // no LockWriters result awaited (applying_ is known)
  uint64_t index_writes_ = 0;
  std::map<std::string, uint64_t> document_writes_;  // by collection
  uint64_t round_trips_ = 0;
  uint64_t statements_ = 0;
  std::vector<Deferred> pending_;
  size_t pending_bytes_ = 0;  // the text of pending_
  bool begun_ = false;  // BEGIN was sent
  bool ended_ = false;  // COMMIT succeeded
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_WORK_H_
