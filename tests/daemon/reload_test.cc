// Tests of what a reload may change (daemon/reload.h) and of the batch
// loop taking new options between rounds (BatchLoop::SetOptions), in memory.
#include "daemon/reload.h"

#include <deque>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/batch_loop.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

constexpr char kConfig[] = R"(source:
  kafka: {brokers: "k:9092", topics: [t], group: g}
store: {schema: lib}
entities: [author]
projections:
  authors: {from: author}
)";

Config Parse(const std::string& yaml) {
  std::vector<ConfigError> errors;
  std::optional<Config> config = ParseConfig(yaml, "t.yaml", &errors);
  EXPECT_TRUE(config.has_value());
  return config.value_or(Config{});
}

TEST(Reload, AcceptsBatchRetentionLimitsAndLogChanges) {
  const ReloadDecision decision = DecideReload(
      Parse(kConfig), Parse(std::string(kConfig) + "batch: {max_events: 7}\n"
                                                   "retention: {interval_s: 60}\n"
                                                   "limits: {fanout_warn: 50}\n"
                                                   "log: {level: debug}\n"));
  EXPECT_TRUE(decision.accepted());
  EXPECT_EQ((std::vector<std::string>{"batch.max_events", "retention.interval_s",
                                      "limits.fanout_warn", "log.level"}),
            decision.live);
  EXPECT_EQ("batch.max_events,retention.interval_s,limits.fanout_warn,log.level",
            JoinSettings(decision.live));
}

TEST(Reload, RefusesEverythingElseAllOrNothing) {
  std::string changed = kConfig;
  changed.replace(changed.find("{from: author}"), 14, "{from: author, exclude: [secret]}");
  changed.replace(changed.find("group: g"), 8, "group: g2");
  const ReloadDecision decision =
      DecideReload(Parse(kConfig), Parse(changed + "batch: {max_events: 7}\n"));
  EXPECT_FALSE(decision.accepted());
  EXPECT_EQ((std::vector<std::string>{"source.kafka.group", "projections.authors"}),
            decision.needs_restart);
  EXPECT_TRUE(decision.needs_apply);
  EXPECT_EQ("`denormd apply` and a restart", RefusedReloadRemedy(decision));
}

TEST(Reload, AChangedProjectionAloneNeedsApplyNotARestart) {
  std::string changed = kConfig;
  changed.replace(changed.find("{from: author}"), 14, "{from: author, exclude: [secret]}");
  const ReloadDecision decision = DecideReload(Parse(kConfig), Parse(changed));
  EXPECT_FALSE(decision.accepted());
  EXPECT_EQ(std::vector<std::string>{"projections.authors"}, decision.needs_restart);
  EXPECT_EQ("`denormd apply`", RefusedReloadRemedy(decision));
}

TEST(Reload, StoreChangesNeedARestartOnly) {
  std::string changed = kConfig;
  changed.replace(changed.find("schema: lib"), 11, "schema: lib2");
  const ReloadDecision decision = DecideReload(Parse(kConfig), Parse(changed));
  EXPECT_EQ(std::vector<std::string>{"store.schema"}, decision.needs_restart);
  EXPECT_EQ("a restart", RefusedReloadRemedy(decision));
  EXPECT_EQ("none", JoinSettings({}));
}

// issue 25: a rotated feed password or a fixed json_columns was "changed:
// none" and stayed old; now each is refused by name (never by value), with
// the live changes beside it not applied either.
TEST(Reload, FeedAndTopicInputChangesAreRefusedByName) {
  const std::string feed = "feed: {topic: docs, properties: {sasl.password: old-pw}}\n";
  std::string changed = std::string(kConfig) + "feed: {topic: docs, properties: {sasl.password: new-pw}}\n";
  changed.replace(changed.find("topics: [t]"), 11,
                  "topics: [{topic: t, format: debezium, entity: author, json_columns: [tags]}]");
  const ReloadDecision decision = DecideReload(
      Parse(std::string(kConfig) + feed), Parse(changed + "batch: {max_events: 7}\n"));
  EXPECT_FALSE(decision.accepted());
  EXPECT_EQ((std::vector<std::string>{"source.kafka.topics.t", "feed.properties"}),
            decision.needs_restart);
  EXPECT_EQ("a restart", RefusedReloadRemedy(decision));
  EXPECT_EQ(std::string::npos, JoinSettings(decision.needs_restart).find("pw"));
}

// Delivers scripted records, as many as each poll asks for, and records the
// sizes asked for.
class ScriptedSource : public EventSource {
 public:
  explicit ScriptedSource(int records) {
    for (int i = 1; i <= records; ++i) {
      queue_.push_back(testing::LogRecord(
          {"scripted", 0, i},
          R"({"type": "author", "id": "a)" + std::to_string(i) + R"(", "op": "upsert", "data": {}})"));
    }
  }
  Status Poll(size_t max, int /*max_delay_ms*/, int /*idle_ms*/,
              std::vector<RawRecord>* out) override {
    asked.push_back(max);
    while (out->size() < max && !queue_.empty()) {
      out->push_back(queue_.front());
      queue_.pop_front();
    }
    return Status::Ok();
  }
  bool Exhausted() const override { return queue_.empty(); }
  const Lanes& lanes() const override { return lanes_; }
  bool Applied(const SourcePosition& /*at*/, const std::string& /*type*/) const override {
    return false;
  }
  std::vector<SourcePosition> FencingPositions(size_t /*lane*/) const override { return {}; }
  void MarkCommitted(size_t /*lane*/, const std::vector<SourcePosition>& /*last*/) override {}
  Status Reseek() override { return Status::Ok(); }

  std::vector<size_t> asked;

 private:
  std::deque<RawRecord> queue_;
  const Lanes lanes_ = Lanes::Single(Config());
};

TEST(BatchLoopOptions, SetOptionsFromAHookAppliesFromTheNextPoll) {
  const Config config = Parse(kConfig);
  const ProjectionPlan plan(config);
  const BatchApplier applier(plan);
  const NativeDecoder decoder(config);
  MemoryStore store;
  ScriptedSource source(10);
  std::atomic<bool> stopping{false};
  BatchLoopOptions options;
  options.max_events = 4;
  std::vector<size_t> committed;
  int alive = 0;
  BatchLoop* loop_pointer = nullptr;
  BatchLoopHooks hooks;
  hooks.after_poll = [&] {
    if (source.asked.size() != 1) return;
    BatchLoopOptions smaller = loop_pointer->options();
    smaller.max_events = 2;
    loop_pointer->SetOptions(smaller);
  };
  hooks.on_commit = [&](const CommittedBatch& batch) { committed.push_back(batch.records.size()); };
  hooks.alive = [&] { ++alive; };
  BatchLoop loop(source, decoder, applier, store, nullptr, options, std::move(hooks), stopping);
  loop_pointer = &loop;
  ASSERT_TRUE(loop.Run().ok());
  EXPECT_EQ((std::vector<size_t>{4, 2, 2, 2}), source.asked);
  EXPECT_EQ((std::vector<size_t>{4, 2, 2, 2}), committed);  // the batch in hand kept its size
  EXPECT_EQ(8, alive);  // after every poll and every commit
  EXPECT_EQ(10u, store.state().collections.at("authors").size());
}

}  // namespace
}  // namespace denormd
