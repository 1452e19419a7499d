// The commands that talk to Kafka: run, relay, publish.
#include <iostream>

#include "common/text.h"
#include "connectors/kafka_publisher.h"
#include "daemon/cli.h"
#include "daemon/command_line.h"
#include "daemon/run.h"

namespace denormd {

int RunCommand(const Arguments& args) {
  std::optional<Config> config = LoadConfigOrReport(args);
  if (!config) return kExitUsage;
  if (!config->kafka) {
    std::cerr << args.config_path << ": `run` needs source.kafka (brokers, topics, group)\n";
    return kExitUsage;
  }
  RunOptions options;
  options.postgres = ConnectionOf(args, *config);
  options.metrics_port = args.metrics_port;
  options.metrics_address = args.metrics_address;
  options.relay = !args.no_relay;
  options.reread_config = [args](std::vector<std::string>* errors) {
    std::vector<ConfigError> found;
    std::optional<Config> config = LoadEffectiveConfig(args, &found);
    for (const ConfigError& error : found) errors->push_back(error.ToString(args.config_path));
    return config;
  };
  return RunDaemon(std::move(*config), options);
}

int PublishCommand(const Arguments& args) {
  std::optional<Config> config = LoadConfigOrReport(args);
  if (!config) return kExitUsage;
  if (!config->kafka) {
    std::cerr << args.config_path << ": `publish` needs source.kafka (brokers, topics)\n";
    return kExitUsage;
  }
  if (args.rest.empty()) {
    std::cerr << "denormd publish: name at least one event log (or - for stdin)\n";
    return kExitUsage;
  }
  std::string topic = args.topic.empty() ? config->kafka->topics.front() : args.topic;
  for (const std::string& path : args.rest) {
    uint64_t published = 0;
    Status status = PublishEventLog(*config->kafka, topic, path, &published);
    if (!status.ok()) {
      std::cerr << "denormd publish: " << path << ": " << status.message() << "\n";
      return kExitFailure;
    }
    std::cout << path << ": " << CountOf(published, "event") << " published to " << topic
              << " at " << config->kafka->brokers << "\n";
  }
  return kExitOk;
}

int RelayCommand(const Arguments& args) {
  std::optional<Config> config = LoadConfigOrReport(args);
  if (!config) return kExitUsage;
  if (!config->feed) {
    std::cerr << args.config_path << ": `relay` needs a feed section (topic or collections)\n";
    return kExitUsage;
  }
  RunOptions options;
  options.postgres = ConnectionOf(args, *config);
  options.metrics_port = args.metrics_port;
  options.metrics_address = args.metrics_address;
  return RunRelay(std::move(*config), options);
}

}  // namespace denormd
