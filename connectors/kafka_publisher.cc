#include "connectors/kafka_publisher.h"

#include <memory>
#include <vector>

#include <librdkafka/rdkafkacpp.h>

#include "connectors/event_log_source.h"
#include "connectors/kafka_client.h"
#include "projections/json.h"

namespace denormd {

namespace {

// "type:id" when the line is an object with string type and id, else "".
std::string KeyOf(const std::string& line) {
  JsonDocument doc;
  if (!ParseJson(line, &doc).ok() || !doc.IsObject()) return "";
  auto type = doc.FindMember("type");
  auto id = doc.FindMember("id");
  if (type == doc.MemberEnd() || id == doc.MemberEnd() || !type->value.IsString() ||
      !id->value.IsString()) {
    return "";
  }
  return std::string(type->value.GetString()) + ":" + id->value.GetString();
}

}  // namespace

Status PublishEventLog(const KafkaSourceConfig& kafka, const std::string& topic,
                       const std::string& path, uint64_t* published) {
  DeliveryCounter deliveries;
  // librdkafka's own messages through denormd's log (a broker still loading
  // its coordinator state is retried, and said at debug only).
  KafkaLogger logger;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  DENORMD_RETURN_IF_ERROR(SetBaseKafkaProperties(kafka, conf.get()));
  DENORMD_RETURN_IF_ERROR(
      SetKafkaProperties(conf.get(), {{"enable.idempotence", "true"}, {"linger.ms", "20"}}));
  DENORMD_RETURN_IF_ERROR(SetUserKafkaProperties(kafka, conf.get()));
  std::string error;
  if (conf->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(&deliveries), error) !=
      RdKafka::Conf::CONF_OK) {
    return Status::Fatal(error);
  }
  if (conf->set("event_cb", static_cast<RdKafka::EventCb*>(&logger), error) !=
      RdKafka::Conf::CONF_OK) {
    return Status::Fatal(error);
  }
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(conf.get(), error));
  if (!producer) return Status::Fatal("cannot create a Kafka producer: " + error);

  EventLogSource log;
  // Lines as they are, however long: the daemon refuses what is too large.
  DENORMD_RETURN_IF_ERROR(log.Open(path, nullptr, Lanes::Single(Config()), UINT64_MAX));
  while (!log.Exhausted()) {
    std::vector<RawRecord> events;
    // From stdin each line is sent as soon as it is read (a live feed);
    // from a file, in chunks.
    DENORMD_RETURN_IF_ERROR(log.Poll(path == "-" ? 1 : 10000, 0, 0, &events));
    for (const RawRecord& event : events) {
      const std::string& bytes = *event.value;
      std::string key = KeyOf(bytes);
      while (true) {
        RdKafka::ErrorCode err = producer->produce(
            topic, RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY,
            const_cast<char*>(bytes.data()), bytes.size(),
            key.empty() ? nullptr : key.data(), key.size(), 0, nullptr);
        if (err == RdKafka::ERR__QUEUE_FULL) {
          producer->poll(100);
          continue;
        }
        if (err != RdKafka::ERR_NO_ERROR) {
          return Status::Transient("producing to " + topic + ": " + RdKafka::err2str(err));
        }
        break;
      }
      ++*published;
      producer->poll(0);
    }
  }
  RdKafka::ErrorCode err = producer->flush(60000);
  if (err != RdKafka::ERR_NO_ERROR) {
    return Status::Transient("not all messages acknowledged by " + kafka.brokers + " in 60 s: " +
                             RdKafka::err2str(err));
  }
  if (deliveries.failures > 0) {
    return Status::Transient(std::to_string(deliveries.failures) + " messages not delivered: " +
                             deliveries.last_error);
  }
  return Status::Ok();
}

}  // namespace denormd
