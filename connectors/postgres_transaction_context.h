// What a PostgresTransaction (postgres_transaction.h) is given from outside
// itself: what its connection remembers between transactions (the prepared
// statements) and which collections' changes it captures. PostgresStore keeps
// them; the transaction's roles use them through PostgresWork
// (postgres_work.h). Not thread-safe.
#ifndef DENORMD_CONNECTORS_POSTGRES_TRANSACTION_CONTEXT_H_
#define DENORMD_CONNECTORS_POSTGRES_TRANSACTION_CONTEXT_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace pqxx {
class connection_base;
}  // namespace pqxx

namespace denormd {

// The statements prepared on one connection: each distinct SQL text is
// prepared once (PostgreSQL parses it once and may keep its plan) under a
// name of its own. Lives as long as the connection; not thread-safe.
class PreparedStatements {
 public:
  explicit PreparedStatements(pqxx::connection_base& connection);
  // The name `sql` is prepared under, preparing it on first use.
  const std::string& Name(const std::string& sql);

 private:
  pqxx::connection_base& connection_;
  std::map<std::string, std::string> names_;
};

// What a connection remembers between its transactions.
struct ConnectionState {
  explicit ConnectionState(pqxx::connection_base& connection) : statements(connection) {}
  PreparedStatements statements;
};

// Which collections' document changes a transaction captures in the
// outbox (<schema>.outbox), and which of those have a partition key (a
// document whose pk changes is then also captured as deleted under the old
// one). Built once per store from the config.
struct ChangeCapture {
  std::set<std::string> published;
  std::set<std::string> partitioned;
};

// Which index rows move the per-target counters (ref_counts): an SQL
// condition on the columns type and field of a row, true but for the
// relations no read counts (a link's sides and pairs: a link's reads find
// rows, never count them). Built once per store from the config
// (IndexCountingOf in postgres_reference_index.h).
struct IndexCounting {
  std::string counted_rows = "true";
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_TRANSACTION_CONTEXT_H_
