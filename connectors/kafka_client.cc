#include "connectors/kafka_client.h"

#include <unistd.h>

#include "common/log.h"
#include "common/redact.h"

namespace denormd {

namespace {

std::string Hostname() {
  char name[256] = "host";
  gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace

Status SetKafkaProperties(RdKafka::Conf* conf,
                          const std::vector<std::pair<std::string, std::string>>& props) {
  std::string error;
  for (const auto& p : props) {
    if (conf->set(p.first, p.second, error) != RdKafka::Conf::CONF_OK) {
      const std::string value = IsSecretKey(p.first) ? "***" : p.second;
      return Status::InvalidInput("librdkafka property " + p.first + "=" + value + ": " +
                                  RedactSecrets(error));
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
      Log(event.fatal() ? LogLevel::kError : LogLevel::kWarn, "kafka_error", {{"error", text}});
      return;
    }
    case RdKafka::Event::EVENT_LOG:
      Log(event.severity() <= RdKafka::Event::EVENT_SEVERITY_ERROR ? LogLevel::kWarn
                                                                      : LogLevel::kDebug,
          "kafka_log", {{"facility", event.fac()}, {"message", event.str()}});
      return;
    default:
      return;
  }
}

}  // namespace denormd
