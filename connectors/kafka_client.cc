#include "connectors/kafka_client.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "common/log.h"
#include "common/redact.h"

namespace denormd {

namespace {

std::string Hostname() {
  char name[256] = "host";
  gethostname(name, sizeof(name) - 1);
  return name;
}

// `text` with every occurrence of `value` (and of each of its lines, for a
// PEM) replaced by "***".
std::string WithoutValue(std::string text, const std::string& value) {
  std::vector<std::string> parts = {value};
  for (size_t start = 0; start < value.size();) {
    size_t end = value.find('\n', start);
    if (end == std::string::npos) end = value.size();
    if (end - start >= 4) parts.push_back(value.substr(start, end - start));
    start = end + 1;
  }
  for (const std::string& part : parts) {
    if (part.empty()) continue;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 3)) {
      text.replace(at, part.size(), "***");
    }
  }
  return text;
}

}  // namespace

Status SetKafkaProperties(RdKafka::Conf* conf,
                          const std::vector<std::pair<std::string, std::string>>& props) {
  std::string error;
  for (const auto& p : props) {
    if (conf->set(p.first, p.second, error) != RdKafka::Conf::CONF_OK) {
      // Only the key: any value may be a secret whatever its key's name
      // (ssl.key.pem, sasl.jaas.config, ...), and librdkafka's message may
      // quote it.
      return Status::InvalidInput("librdkafka property " + p.first + " (value not shown): " +
                                  RedactSecrets(WithoutValue(error, p.second)));
    }
  }
  return Status::Ok();
}

Status SetBaseKafkaProperties(const KafkaSourceConfig& kafka, RdKafka::Conf* conf) {
  return SetKafkaProperties(
      conf, {{"bootstrap.servers", kafka.brokers},
             {"client.id", "denormd-" + Hostname() + "-" + std::to_string(getpid())}});
}

Status SetUserKafkaProperties(const KafkaSourceConfig& kafka, RdKafka::Conf* conf) {
  return SetKafkaProperties(conf, kafka.properties);
}

void KafkaLogger::event_cb(RdKafka::Event& event) {
  switch (event.type()) {
    case RdKafka::Event::EVENT_ERROR: {
      std::string text = RdKafka::err2str(event.err()) + ": " + event.str();
      if (text == last_error_) return;
      last_error_ = text;
      // A broker that just started loads its group and transaction state;
      // librdkafka retries until it is loaded (seconds): not worth a warning.
      const bool loading = event.err() == RdKafka::ERR_COORDINATOR_LOAD_IN_PROGRESS;
      Log(event.fatal() ? LogLevel::kError : loading ? LogLevel::kDebug : LogLevel::kWarn,
          "kafka_error", {{"error", text}});
      return;
    }
    case RdKafka::Event::EVENT_LOG: {
      const bool loading = event.str().find("oordinator load in progress") != std::string::npos;
      Log(event.severity() <= RdKafka::Event::EVENT_SEVERITY_ERROR && !loading ? LogLevel::kWarn
                                                                                : LogLevel::kDebug,
          "kafka_log", {{"facility", event.fac()}, {"message", event.str()}});
      return;
    }
    default:
      return;
  }
}

}  // namespace denormd
