#include "connectors/postgres_transaction_context.h"

#include <utility>

#include <pqxx/pqxx>

namespace denormd {

PreparedStatements::PreparedStatements(pqxx::connection_base& connection)
    : connection_(connection) {}

const std::string& PreparedStatements::Name(const std::string& sql) {
  auto found = names_.find(sql);
  if (found != names_.end()) return found->second;
  std::string name = "denormd_" + std::to_string(names_.size());
  connection_.prepare(name, sql);
  return names_.emplace(sql, std::move(name)).first->second;
}

}  // namespace denormd
