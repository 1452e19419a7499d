#include "daemon/command_line.h"

#include <cstdlib>
#include <iostream>

#include "common/redact.h"
#include "connectors/postgres_admin.h"
#include "daemon/cli.h"
#include "daemon/reload.h"
#include "formats/format_registry.h"

namespace denormd {

std::optional<Config> LoadEffectiveConfig(const Arguments& args, std::vector<ConfigError>* errors) {
  std::optional<Config> config = LoadConfig(args.config_path, errors);
  if (!config) return config;
  // $DENORMD_KAFKA_BROKERS overrides source.kafka.brokers, as
  // $DENORMD_POSTGRES overrides store.postgres: one config file serves
  // every environment.
  const char* brokers = std::getenv("DENORMD_KAFKA_BROKERS");
  if (config->kafka && brokers != nullptr && *brokers != '\0') {
    // A feed without brokers of its own follows the source's.
    if (config->feed && config->feed->brokers == config->kafka->brokers) {
      config->feed->brokers = brokers;
    }
    config->kafka->brokers = brokers;
  }
  const char* feed_brokers = std::getenv("DENORMD_FEED_BROKERS");
  if (config->feed && feed_brokers != nullptr && *feed_brokers != '\0') {
    config->feed->brokers = feed_brokers;
  }
  if (args.batch_size) config->batch.max_events = *args.batch_size;
  if (args.verbose) config->log.level = LogLevel::kDebug;
  if (args.quiet) config->log.level = LogLevel::kWarn;
  if (args.log_format) config->log.format = *args.log_format;
  return config;
}

std::optional<Config> LoadConfigOrReport(const Arguments& args) {
  const std::string& path = args.config_path;
  std::vector<ConfigError> errors;
  std::optional<Config> config = LoadEffectiveConfig(args, &errors);
  for (const ConfigError& error : errors) std::cerr << error.ToString(path) << "\n";
  // A file that could not be read has no errors of its contents to count.
  const bool unread = errors.size() == 1 && errors[0].place.line == 0 &&
                      errors[0].message.rfind("cannot read the config file", 0) == 0;
  if (!config && !unread) {
    std::cerr << path << ": " << errors.size() << " error" << (errors.size() == 1 ? "" : "s")
              << "; see docs/configuration.md\n";
  }
  if (!config) return config;
  ApplyLogConfig(config->log);
  return config;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string ConnectionOf(const Arguments& args, const Config& config) {
  return args.postgres ? *args.postgres : PostgresConnectionString(config);
}

int OpenEngine(const Arguments& args, std::unique_ptr<Engine>* out,
               StoreAdministration::OpenMode mode, std::unique_ptr<AdministrationLock>* lock) {
  std::optional<Config> config = LoadConfigOrReport(args);
  if (!config) return kExitUsage;
  const std::string connection = ConnectionOf(args, *config);
  *out = std::make_unique<Engine>(std::move(*config), PostgresStores(connection));
  Status status = Status::Ok();
  if (lock != nullptr) status = (*out)->store.LockAdministration(args.command, lock);
  if (status.IsBusy()) {
    std::cerr << "denormd " << args.command << ": " << status.message() << "\n";
    return kExitFailure;
  }
  if (status.ok()) status = (*out)->store.Open(mode);
  if (!status.ok()) {
    if (status.IsInvalidInput() || status.IsStaleConfig()) {
      std::cerr << "denormd " << args.command << ": " << status.message() << "\n";
      return kExitUsage;
    }
    const char* env = std::getenv("DENORMD_POSTGRES");
    const std::string from = args.postgres                    ? "--postgres"
                             : env != nullptr && *env != '\0' ? "$DENORMD_POSTGRES"
                                                              : "store.postgres of " + args.config_path;
    std::cerr << "denormd: cannot open the store ("
              << (connection.empty() ? "libpq defaults" : RedactSecrets(connection)) << ", from "
              << from << "): " << status.message() << "\n"
              << "  (another server: --postgres URL, or $DENORMD_POSTGRES; either overrides "
                 "store.postgres)\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace denormd
