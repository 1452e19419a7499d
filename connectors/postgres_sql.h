// Helpers shared by the PostgreSQL store's files: failures classified by what
// a retry would do, array literals and hex for parameters.
#ifndef DENORMD_CONNECTORS_POSTGRES_SQL_H_
#define DENORMD_CONNECTORS_POSTGRES_SQL_H_

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "common/status.h"

namespace pqxx {
class result;
}  // namespace pqxx

namespace denormd {

// Converts a libpqxx exception into a Status that says what a retry would
// do: Transient for a lost connection, deadlock, serialization failure,
// server shutdown or resource exhaustion (and a commit whose outcome is
// unknown, and a lock not granted within lock_timeout: a caller that asked
// for a brief wait makes that one Busy itself); InvalidInput for data the
// server refuses (a data exception, a value too large to index, a
// constraint); Fatal otherwise. `what` says what was being done.
Status FromPostgresException(const std::exception& e, const std::string& what);

// A failure already classified (a deferred statement's, reported by the
// statement that sent it): Guard returns its status as it is.
class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return status_.message().c_str(); }

 private:
  Status status_;
};

// Runs `body`, converting any exception with FromPostgresException (a
// StatusError to its status).
template <typename F>
Status Guard(const std::string& what, F&& body) {
  try {
    body();
    return Status::Ok();
  } catch (const StatusError& e) {
    return e.status();
  } catch (const std::exception& e) {
    return FromPostgresException(e, what);
  }
}

// The indexes of a collection's table, by name suffix: every collection's,
// and those only a collection several projections share has (its key
// (coalesce(pk, ''), id), and its ids, by which a batch finds a document
// whose partition key it does not know). postgres_store.cc creates and owns
// them; `denormd apply` renames those of a table it rebuilt.
inline constexpr const char* kCollectionIndexSuffixes[] = {"_by_pk", "_by_lo", "_by_seq",
                                                           "_by_number"};
inline constexpr const char* kSharedCollectionIndexSuffixes[] = {"_key", "_by_id"};

// An identifier, quoted as PostgreSQL reads it ("a""b" for a"b), without
// the connection: pqxx's quote_name asks libpq, which needs a live
// connection, and throws out of code that builds SQL before sending it
// (outside Guard) once the connection is lost.
std::string QuoteIdentifier(const std::string& name);

// Appends `text` to *out as a string literal ('it''s'), without the
// connection. Every denormd session pins standard_conforming_strings on
// (postgres_store.cc), so a literal escapes its quotes and nothing else; a
// quote is never the trail byte of a multibyte character in any client
// encoding PostgreSQL offers, so doubling it is the whole of escaping.
// Throws std::invalid_argument for a NUL byte, which no literal can hold
// (call it inside Guard, or where Defer catches).
void AppendStringLiteral(const std::string& text, std::string* out);

// PostgreSQL array literals: {"a","b\"c"} and {1,-2,3}.
std::string PgTextArray(const std::vector<std::string>& values);
std::string PgBigintArray(const std::vector<int64_t>& values);
// A text[] as array_to_json(...)::text gives it back: its elements in
// order. Fatal when the text is not an array of strings.
Status TextArrayFromJson(const std::string& json, std::vector<std::string>* out);

// Lowercase hex of bytes, and back (for bytea parameters and results).
std::string HexEncode(const std::string& bytes);
std::string HexDecode(const char* hex);

// FNV-1a 64-bit hash of a lock key: the row of the locks table that stands for it.
int64_t LockRowId(const std::string& key);

// A result's rows as text, fields separated by tabs (NULL as ""); appended
// to *rows unless it is null.
void RowsAsText(const pqxx::result& result, std::vector<std::string>* rows);

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_SQL_H_
