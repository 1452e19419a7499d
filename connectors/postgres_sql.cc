#include "connectors/postgres_sql.h"

#include <algorithm>
#include <stdexcept>

#include <pqxx/pqxx>

#include "common/redact.h"
#include "common/text.h"
#include "projections/json.h"

namespace denormd {

Status FromPostgresException(const std::exception& e, const std::string& what) {
  std::string detail = RedactSecrets(e.what());  // libpq's words, without its trailing newline
  while (!detail.empty() && (detail.back() == '\n' || detail.back() == ' ')) detail.pop_back();
  const std::string message = what + ": " + detail;
  if (dynamic_cast<const pqxx::in_doubt_error*>(&e) != nullptr) {
    return Status::Transient("commit outcome unknown (connection lost during commit): " + message);
  }
  if (dynamic_cast<const pqxx::broken_connection*>(&e) != nullptr) {
    // libpq's own words for a lost connection are about its symptom ("Could
    // not obtain client encoding: not connected."): say what happened first.
    return Status::Transient(what + ": the connection to PostgreSQL was lost (" + detail + ")");
  }
  // Deadlock, serialization failure: the transaction was rolled back.
  if (dynamic_cast<const pqxx::transaction_rollback*>(&e) != nullptr) {
    return Status::Transient(message);
  }
  if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e)) {
    const std::string state = sql->sqlstate();
    // 40xxx: serialization failure, deadlock; 08xxx: connection; 57P0x:
    // server shutting down or starting; 53xxx: out of resources.
    // 55P03 lock_not_available: a lock_timeout (retry the batch; a brief
    // wait's refusal is told apart by the caller, PostgresWriteLocks::LockKeys);
    // 57014 query_canceled: a statement_timeout or a cancel request.
    if (state == "55P03" || state == "57014") {
      return Status::Transient(message + " (SQLSTATE " + state + ")");
    }
    // 22xxx: data exception (a value PostgreSQL cannot take); 54xxx: program
    // limit exceeded (an index row too large); 23xxx: integrity constraint.
    // The data itself is refused: a retry fails the same way, and the batch
    // loop finds the record responsible (BatchLoop).
    if (state.rfind("22", 0) == 0 || state.rfind("54", 0) == 0 || state.rfind("23", 0) == 0) {
      return Status::InvalidInput(message + " (SQLSTATE " + state + ")");
    }
    if (state.rfind("40", 0) == 0 || state.rfind("08", 0) == 0 || state.rfind("57P", 0) == 0 ||
        state.rfind("53", 0) == 0) {
      return Status::Transient(message + " (SQLSTATE " + state + ")");
    }
    return Status::Fatal(message + (state.empty() ? "" : " (SQLSTATE " + state + ")"));
  }
  return Status::Fatal(message);
}

std::string QuoteIdentifier(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void AppendStringLiteral(const std::string& text, std::string* out) {
  if (text.find('\0') != std::string::npos) {
    throw std::invalid_argument("a text with a NUL byte cannot be an SQL literal");
  }
  out->reserve(out->size() + text.size() + 2 +
               static_cast<size_t>(std::count(text.begin(), text.end(), '\'')));
  out->push_back('\'');
  size_t from = 0;
  for (size_t quote = text.find('\''); quote != std::string::npos;
       quote = text.find('\'', from)) {
    out->append(text, from, quote + 1 - from);
    out->push_back('\'');
    from = quote + 1;
  }
  out->append(text, from, std::string::npos);
  out->push_back('\'');
}

std::string PgTextArray(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += '"';
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

std::string PgBigintArray(const std::vector<int64_t>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(values[i]);
  }
  out += '}';
  return out;
}

std::string HexEncode(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string HexDecode(const char* hex) {
  auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  std::string out;
  for (size_t i = 0; hex[i] != '\0' && hex[i + 1] != '\0'; i += 2) {
    out.push_back(static_cast<char>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
  }
  return out;
}

int64_t LockRowId(const std::string& key) { return static_cast<int64_t>(Fnv1a64(key)); }

void RowsAsText(const pqxx::result& result, std::vector<std::string>* rows) {
  if (rows == nullptr) return;
  for (const auto& row : result) {
    std::string line;
    for (pqxx::row::size_type i = 0; i < row.size(); ++i) {
      if (i) line += '\t';
      line += row[i].is_null() ? "" : row[i].c_str();
    }
    rows->push_back(line);
  }
}

Status TextArrayFromJson(const std::string& json, std::vector<std::string>* out) {
  JsonDocument array;
  if (!ParseJson(json, &array).ok() || !array.IsArray()) {
    return Status::Fatal("not a JSON array of strings: " + json);
  }
  for (const JsonValue& element : array.GetArray()) {
    if (!element.IsString()) return Status::Fatal("not a JSON array of strings: " + json);
    out->emplace_back(element.GetString(), element.GetStringLength());
  }
  return Status::Ok();
}

}  // namespace denormd
