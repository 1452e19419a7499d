// ConsumerReadAhead: how far `run`'s consumer reads ahead of the batches, and
// that the user's source.kafka.properties still decide over it.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include <librdkafka/rdkafkacpp.h>

#include "connectors/kafka_client.h"
#include "connectors/kafka_source.h"

namespace denormd {
namespace {

std::map<std::string, std::string> AsMap(const BatchConfig& batch) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : ConsumerReadAhead(batch)) out[key] = value;
  return out;
}

TEST(ConsumerReadAhead, IsTwoBatchesAPartitionAndSixteenMebibytes) {
  BatchConfig batch;
  batch.max_events = 5000;
  EXPECT_EQ((std::map<std::string, std::string>{{"queued.max.messages.kbytes", "16384"},
                                                 {"queued.min.messages", "10000"}}),
            AsMap(batch));
  batch.max_events = 1;  // at least 1,000 messages a partition
  EXPECT_EQ("1000", AsMap(batch)["queued.min.messages"]);
}

TEST(ConsumerReadAhead, LibrdkafkaAcceptsItAndTheUsersPropertiesOverrideIt) {
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  BatchConfig batch;
  ASSERT_TRUE(SetKafkaProperties(conf.get(), ConsumerReadAhead(batch)).ok());
  std::string value;
  ASSERT_EQ(RdKafka::Conf::CONF_OK, conf->get("queued.min.messages", value));
  EXPECT_EQ("10000", value);
  KafkaSourceConfig kafka;
  kafka.properties = {{"queued.min.messages", "77"}};
  ASSERT_TRUE(SetUserKafkaProperties(kafka, conf.get()).ok());
  ASSERT_EQ(RdKafka::Conf::CONF_OK, conf->get("queued.min.messages", value));
  EXPECT_EQ("77", value);
  ASSERT_EQ(RdKafka::Conf::CONF_OK, conf->get("queued.max.messages.kbytes", value));
  EXPECT_EQ("16384", value);
}

}  // namespace
}  // namespace denormd
