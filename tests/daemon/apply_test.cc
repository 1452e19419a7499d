// `denormd plan` and `denormd apply` on PostgreSQL (daemon/apply.h): plan's
// counts equal what apply writes; the result equals a fresh replay with the
// new config; batches that run while apply builds are caught up; a batch of
// the old config after the switch is fenced; a killed apply leaves the old
// projections serving and the next apply finishes the change.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>
#include <rapidjson/document.h>

#include "connectors/postgres_admin.h"
#include "connectors/postgres_store.h"
#include "daemon/apply.h"
#include "formats/decoder.h"
#include "formats/format_registry.h"
#include "projections/document_set.h"
#include "projections/maintenance.h"
#include "tests/article_changes.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::ReadFile;
using testing::RunDenormd;
using testing::SourcePath;
using testing::Sql;

using testing::ArticleText;
using testing::Changes;
using testing::ConfigChange;
using testing::LogSlice;
using testing::Parse;
using testing::Replace;

// The documents of `config`'s schema, with its bucket shapes.
DocumentSet Read(const Config& config) { return testing::ReadDocumentSet(config); }

// What `denormd apply --json` / `plan --json` said of the documents.
std::string DocumentsOf(const std::string& json_output) {
  rapidjson::Document doc;
  const size_t start = json_output.find('{');
  if (start == std::string::npos) return "(no JSON in: " + json_output + ")";
  doc.Parse(json_output.c_str() + start);
  if (doc.HasParseError() || !doc.HasMember("documents")) return "(bad JSON: " + json_output + ")";
  std::string out;
  for (const auto& c : doc["documents"].GetObject()) {
    out += std::string(c.name.GetString()) + ": written " +
           std::to_string(c.value["written"].GetUint64()) + ", deleted " +
           std::to_string(c.value["deleted"].GetUint64()) + ", unchanged " +
           std::to_string(c.value["unchanged"].GetUint64()) + "\n";
  }
  return out;
}

// `denormd` with stdout only (progress goes to stderr).
testing::CommandResult Denormd(const std::vector<std::string>& args) {
  return testing::RunDenormdWith({{"DENORMD_POSTGRES", testing::TestPostgresUrl()}}, args);
}

// The documents of `config` after a fresh replay of `logs` into another
// schema.
DocumentSet FreshReplay(const std::string& text, const std::string& schema,
                        const std::vector<std::string>& logs) {
  std::string fresh = text;
  const std::string fresh_schema = "fresh_" + std::to_string(std::hash<std::string>()(schema));
  Replace(&fresh, "schema: " + schema, "schema: " + fresh_schema);
  Sql("drop schema if exists " + fresh_schema + " cascade");
  const std::string file = testing::WriteTempFile("fresh.yaml", fresh);
  std::vector<std::string> args = {"replay", "-c", file};
  args.insert(args.end(), logs.begin(), logs.end());
  std::string output;
  EXPECT_EQ(0, RunDenormd(args, &output)) << output;
  return Read(Parse(fresh));
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

class ApplyChange : public ::testing::TestWithParam<size_t> {};

TEST_P(ApplyChange, PlanCountsEqualWhatApplyWritesAndTheResultEqualsAFreshReplay) {
  const ConfigChange& change = Changes()[GetParam()];
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1 = testing::WriteTempFile("v1.yaml", ArticleText(schema, {}));
  const std::string v2_text = ArticleText(schema, {&change});
  const std::string v2 = testing::WriteTempFile("v2.yaml", v2_text);
  const std::string log = SourcePath("tests/data/article/events-random.jsonl");
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, log}, &output)) << output;

  testing::CommandResult plan = Denormd({"plan", "-c", v2, "--json"});
  ASSERT_EQ(3, plan.code) << plan.out << plan.err;  // 3: something would change
  testing::CommandResult applied = Denormd({"apply", "-c", v2, "--json"});
  ASSERT_EQ(0, applied.code) << applied.out << applied.err;
  EXPECT_EQ(DocumentsOf(plan.out), DocumentsOf(applied.out));
  EXPECT_NE(std::string::npos, applied.out.find("\"to_epoch\":2")) << applied.out;
  if (std::string(change.name) == "ChangeViaRelation") {
    EXPECT_NE(std::string::npos, applied.out.find("\"relations_added\":[\"book ")) << applied.out;
  }
  if (std::string(change.name) == "RemoveProjection") {
    EXPECT_EQ(std::vector<std::string>{""}, Sql("select coalesce(to_regclass('" + schema +
                                                 ".portfolios')::text, '')"));
  }

  EXPECT_EQ(0, RunDenormd({"verify", "-c", v2}, &output)) << output;
  const Config config = Parse(v2_text);
  EXPECT_EQ("", Joined(DiffDocumentSets(Read(config), FreshReplay(v2_text, schema, {log}))));
  // Nothing left beside the collections.
  EXPECT_EQ(std::vector<std::string>{"0"},
            Sql("select count(*) from pg_tables where schemaname = '" + schema +
                "' and (tablename like '%\\_\\_next' or tablename like '%\\_\\_plan')"));

  // Applying it again changes nothing; planning it says so (exit 0).
  testing::CommandResult again = Denormd({"apply", "-c", v2});
  EXPECT_EQ(0, again.code) << again.err;
  EXPECT_NE(std::string::npos, again.out.find("nothing to change")) << again.out;
  EXPECT_EQ(0, Denormd({"plan", "-c", v2}).code);
  EXPECT_EQ(std::vector<std::string>{"2"},
            Sql("select value from " + schema + ".meta where key = 'epoch'"));
  // The old file is refused now, naming plan and apply.
  EXPECT_EQ(2, RunDenormd({"replay", "-c", v1, log}, &output));
  EXPECT_NE(std::string::npos, output.find("denormd apply -c " + v1)) << output;
  // ... and creates nothing: a removed collection does not come back.
  EXPECT_EQ(0, Denormd({"status", "-c", v1}).code);
  EXPECT_EQ(2, RunDenormd({"verify", "-c", v1}, &output));
  if (std::string(change.name) == "RemoveProjection") {
    EXPECT_EQ(std::vector<std::string>{""}, Sql("select coalesce(to_regclass('" + schema +
                                                 ".portfolios')::text, '')"));
  }
}

INSTANTIATE_TEST_SUITE_P(Changes, ApplyChange, ::testing::Range<size_t>(0, 5),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return std::string(Changes()[info.param].name);
                         });

// Batches of the old config run while apply builds: between the build and
// the catch-up, and between the catch-up and the switch. Their changes reach
// the new tables through the journal; a store opened with the old config
// before the switch is fenced after it and writes nothing.
TEST(Apply, BatchesDuringTheBuildAreCaughtUpAndOldBatchesAfterTheSwitchAreFenced) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::vector<const ConfigChange*> all = {&Changes()[0], &Changes()[1], &Changes()[2],
                                                &Changes()[3], &Changes()[4]};
  const std::string v1_text = ArticleText(schema, {});
  const std::string v2_text = ArticleText(schema, all);
  const std::string v1 = testing::WriteTempFile("v1.yaml", v1_text);
  const std::string log = SourcePath("tests/data/article/events-random.jsonl");
  const std::string first = LogSlice(log, 0, 2000, "first.jsonl");
  const std::string second = LogSlice(log, 2000, 2800, "second.jsonl");
  const std::string third = LogSlice(log, 2800, 100000, "third.jsonl");
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, first}, &output)) << output;

  // A store of the old config, opened before the apply.
  Config old_config = Parse(v1_text);
  old_config.store.postgres = testing::TestPostgresUrl();
  Engine old_engine(old_config, testing::TestPostgresUrl());
  ASSERT_TRUE(old_engine.store.Open().ok());

  Config target = Parse(v2_text);
  ReconfigureOptions options;
  options.postgres = testing::TestPostgresUrl();
  std::vector<std::string> steps;
  options.at_step = [&](const char* step) {
    steps.push_back(step);
    std::string out;
    // The old config's batches go on: the apply has not switched yet.
    if (std::string(step) == "apply_built") {
      EXPECT_EQ(0, RunDenormd({"replay", "-c", v1, second}, &out)) << out;
    }
    if (std::string(step) == "apply_caught_up") {
      EXPECT_EQ(0, RunDenormd({"replay", "-c", v1, third}, &out)) << out;
    }
  };
  ReconfigureReport report;
  ASSERT_TRUE(Reconfigure(target, options, &report).ok());
  EXPECT_EQ((std::vector<std::string>{"apply_marked", "apply_indexed", "apply_built",
                                      "apply_caught_up", "apply_switching"}),
            steps);
  // The second slice was caught up in a round, the third in the switch.
  EXPECT_GT(report.journal_changes, 0u);
  EXPECT_EQ(2u, report.to_epoch);

  // Exactly a fresh replay of the whole log with the new config.
  EXPECT_EQ("", Joined(DiffDocumentSets(Read(target), FreshReplay(v2_text, schema, {log}))));
  const std::string v2 = testing::WriteTempFile("v2.yaml", v2_text);
  EXPECT_EQ(0, RunDenormd({"verify", "-c", v2}, &output)) << output;
  EXPECT_EQ(std::vector<std::string>{"0"}, Sql("select count(*) from " + schema + ".apply_journal"));

  // The old store's next batch is fenced: StaleConfig, nothing written.
  const std::vector<std::string> positions_before =
      Sql("select source, partition, position from " + schema + ".positions order by 1, 2");
  const EventBatch batch = DecodeBatch(
      old_engine.decoder,
      {testing::LogRecord(
          {"fenced.jsonl", 0, 1},
          R"({"type":"author","id":"a-fenced","op":"upsert","version":1,"data":{"firstName":"F"}})")});
  BatchStats stats;
  Status fenced = old_engine.applier.Apply(&old_engine.store, batch, &stats);
  EXPECT_TRUE(fenced.IsStaleConfig()) << fenced.ToString();
  EXPECT_EQ(positions_before,
            Sql("select source, partition, position from " + schema + ".positions order by 1, 2"));
  EXPECT_EQ(std::vector<std::string>{"0"},
            Sql("select count(*) from " + schema + ".entities where id = 'a-fenced'"));
}

// A book deleted after apply built its rows of a new relation, before the
// build renders the documents that read them: the stale rows name an entity
// that is gone; the build must skip it (it crashed on it once), and the
// catch-up must leave the documents exact.
TEST(Apply, AnEntityDeletedAfterItsNewIndexRowsWereBuiltIsNotRendered) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1 = testing::WriteTempFile("v1.yaml", ArticleText(schema, {}));
  const std::string v2_text = ArticleText(schema, {&Changes()[2]});
  const std::string log = SourcePath("tests/data/article/events.jsonl");
  const std::string deletes = testing::WriteTempFile(
      "deletes.jsonl", R"({"id": "b1", "op": "delete", "type": "book", "version": 9})"
                       "\n");
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, log}, &output)) << output;
  ReconfigureOptions options;
  options.postgres = testing::TestPostgresUrl();
  options.at_step = [&](const char* step) {
    std::string out;
    if (std::string(step) == "apply_indexed") {
      EXPECT_EQ(0, RunDenormd({"replay", "-c", v1, deletes}, &out)) << out;
    }
  };
  ReconfigureReport report;
  const Config target = Parse(v2_text);
  Status status = Reconfigure(target, options, &report);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ("",
            Joined(DiffDocumentSets(Read(target), FreshReplay(v2_text, schema, {log, deletes}))));
}

// With a change feed, the documents the switch writes or deletes in a
// published collection go to the outbox like a batch's: as many as apply
// reports, attributed to the apply.
TEST(Apply, TheSwitchCapturesItsChangesForTheFeed) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string feed = "feed:\n  topic: documents\n";
  const std::string v1 = testing::WriteTempFile("v1.yaml", ArticleText(schema, {}) + feed);
  // The new file's feed names the new collection (which the store's model
  // lacks until the switch).
  const std::string v2 = testing::WriteTempFile(
      "v2.yaml", ArticleText(schema, {&Changes()[1], &Changes()[4]}) + feed +
                     "  collections: {book_titles: titles}\n");
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, SourcePath("tests/data/article/events.jsonl")},
                          &output))
      << output;
  const std::string before = Sql("select coalesce(max(seq), 0) from " + schema + ".outbox")[0];
  testing::CommandResult applied = Denormd({"apply", "-c", v2, "--json"});
  ASSERT_EQ(0, applied.code) << applied.err;
  const std::string documents = DocumentsOf(applied.out);
  // book_titles is new (every document), post_comments re-paged.
  const std::vector<std::string> captured =
      Sql("select collection, count(*) filter (where doc is not null),"
          " count(*) filter (where doc is null) from " + schema + ".outbox where seq > " + before +
          " and source = 'apply epoch 2' group by 1 order by 1");
  std::string expected;
  for (const std::string& line : captured) {
    std::string collection = line.substr(0, line.find('\t'));
    std::string rest = line.substr(line.find('\t') + 1);
    expected += collection + ": written " + rest.substr(0, rest.find('\t')) + ", deleted " +
                rest.substr(rest.find('\t') + 1);
    expected += "\n";
  }
  // DocumentsOf lists unchanged too: compare the written/deleted part.
  std::string reported;
  for (size_t at = 0; at < documents.size();) {
    size_t end = documents.find('\n', at);
    std::string line = documents.substr(at, end - at);
    reported += line.substr(0, line.find(", unchanged")) + "\n";
    at = end + 1;
  }
  EXPECT_EQ(reported, expected);
  EXPECT_NE(std::string::npos, expected.find("book_titles: written ")) << expected;
}

// A config that does not validate is refused before anything is touched.
TEST(Apply, AnInvalidConfigChangesNothing) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1 = testing::WriteTempFile("v1.yaml", ArticleText(schema, {}));
  std::string bad_text = ArticleText(schema, {&Changes()[1]});
  Replace(&bad_text, "lookup: publisher, by: pubId", "lookup: publisherz, by: pubId");
  const std::string bad = testing::WriteTempFile("bad.yaml", bad_text);
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, SourcePath("tests/data/article/events.jsonl")},
                          &output))
      << output;
  testing::CommandResult refused = Denormd({"apply", "-c", bad});
  EXPECT_EQ(2, refused.code);
  EXPECT_NE(std::string::npos, refused.err.find("publisherz")) << refused.err;
  EXPECT_EQ(std::vector<std::string>{"1"},
            Sql("select value from " + schema + ".meta where key = 'epoch'"));
  EXPECT_EQ(std::vector<std::string>{"0"},
            Sql("select count(*) from " + schema + ".meta where key = 'applying'"));
  EXPECT_EQ(0, RunDenormd({"verify", "-c", v1}, &output)) << output;
}

class KilledApply : public ::testing::TestWithParam<const char*> {};

// kill -9 at each step: the old projections keep serving, `status` tells,
// and the next apply removes what was left and makes the same result.
TEST_P(KilledApply, LeavesTheOldServingAndTheNextApplyFinishes) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1 = testing::WriteTempFile("v1.yaml", ArticleText(schema, {}));
  const std::string v2_text = ArticleText(schema, {&Changes()[2], &Changes()[4]});
  const std::string v2 = testing::WriteTempFile("v2.yaml", v2_text);
  const std::string log = SourcePath("tests/data/article/events-random.jsonl");
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, log}, &output)) << output;
  const DocumentSet before = Read(Parse(ArticleText(schema, {})));

  testing::CommandResult killed = testing::RunDenormdWith(
      {{"DENORMD_POSTGRES", testing::TestPostgresUrl()}, {"DENORMD_CRASH_AT", GetParam()}},
      {"apply", "-c", v2});
  ASSERT_NE(0, killed.code) << killed.out << killed.err;
  EXPECT_EQ(std::vector<std::string>{"1"},
            Sql("select value from " + schema + ".meta where key = 'epoch'"));
  // The old projections serve, unchanged, and verify clean with the old file.
  EXPECT_EQ("", Joined(DiffDocumentSets(Read(Parse(ArticleText(schema, {}))), before)));
  EXPECT_EQ(0, RunDenormd({"verify", "-c", v1}, &output)) << output;
  testing::CommandResult status = Denormd({"status", "-c", v1});
  EXPECT_NE(std::string::npos, status.out.find("an apply was interrupted (")) << status.out;
  EXPECT_NE(std::string::npos, status.out.find("stale, no apply holds the lock")) << status.out;
  if (std::string(GetParam()) != "apply_marked") {  // the tables exist from the build on
    EXPECT_NE(std::string::npos,
              status.out.find("tables a killed plan or apply left: authors__next post_comments__next"))
        << status.out;
  }

  testing::CommandResult again = Denormd({"apply", "-c", v2});
  ASSERT_EQ(0, again.code) << again.out << again.err;
  EXPECT_NE(std::string::npos, again.out.find("removed what an unfinished apply left")) << again.out;
  EXPECT_EQ(0, RunDenormd({"verify", "-c", v2}, &output)) << output;
  EXPECT_EQ("", Joined(DiffDocumentSets(Read(Parse(v2_text)), FreshReplay(v2_text, schema, {log}))));
  EXPECT_EQ(std::vector<std::string>{"0"},
            Sql("select count(*) from pg_tables where schemaname = '" + schema +
                "' and tablename like '%\\_\\_next'"));
  EXPECT_EQ(std::vector<std::string>{"0"}, Sql("select count(*) from " + schema + ".meta where key = 'applying'"));
}

INSTANTIATE_TEST_SUITE_P(Steps, KilledApply,
                         ::testing::Values("apply_marked", "apply_indexed", "apply_built",
                                           "apply_caught_up", "apply_switching"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           name.erase(0, std::string("apply_").size());
                           return name;
                         });

// A killed plan leaves tables and index rows of its own; the next plan and
// apply do not count them, and apply's result is exact.
TEST(Plan, SampleEstimatesAndLeavesNothingBehind) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1 = testing::WriteTempFile("v1.yaml", ArticleText(schema, {}));
  const std::string v2 =
      testing::WriteTempFile("v2.yaml", ArticleText(schema, {&Changes()[1], &Changes()[2]}));
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, SourcePath("tests/data/article/events-random.jsonl")},
                          &output))
      << output;
  const std::vector<std::string> index_rows = Sql("select count(*) from " + schema + ".refs");
  testing::CommandResult exact = Denormd({"plan", "-c", v2, "--json"});
  ASSERT_EQ(3, exact.code) << exact.err;
  testing::CommandResult sampled = Denormd({"plan", "-c", v2, "--json", "--sample", "0.5"});
  ASSERT_EQ(3, sampled.code) << sampled.err;
  EXPECT_NE(std::string::npos, sampled.out.find("\"estimated\":true")) << sampled.out;
  EXPECT_NE(std::string::npos, exact.out.find("\"estimated\":false")) << exact.out;
  // Plans change nothing: no tables, no index rows, no epoch.
  EXPECT_EQ(index_rows, Sql("select count(*) from " + schema + ".refs"));
  EXPECT_EQ(std::vector<std::string>{"0"},
            Sql("select count(*) from pg_tables where schemaname = '" + schema +
                "' and tablename like '%\\_\\_plan'"));
  EXPECT_EQ(std::vector<std::string>{"1"},
            Sql("select value from " + schema + ".meta where key = 'epoch'"));
  EXPECT_EQ(2, Denormd({"plan", "-c", v2, "--sample", "0"}).code);
  // A killed plan: its tables and rows are not counted by the next plan.
  testing::CommandResult killed = testing::RunDenormdWith(
      {{"DENORMD_POSTGRES", testing::TestPostgresUrl()}, {"DENORMD_CRASH_AT", "apply_indexed"}},
      {"plan", "-c", v2});
  ASSERT_NE(0, killed.code);
  EXPECT_NE(std::string::npos, Denormd({"status", "-c", v1}).out.find("book_titles__plan"));
  testing::CommandResult after = Denormd({"plan", "-c", v2, "--json"});
  EXPECT_EQ(DocumentsOf(exact.out), DocumentsOf(after.out));
  EXPECT_EQ(std::vector<std::string>{"0"},
            Sql("select count(*) from pg_tables where schemaname = '" + schema +
                "' and tablename like '%\\_\\_plan'"));
}

}  // namespace
}  // namespace denormd

namespace denormd {
namespace {

// issue 25: `plan` dropped an application's table whose name ended in
// __plan. plan and apply drop only the scratch tables that carry denormd's
// mark; an unmarked table of a scratch table's name makes the command fail
// (naming it) instead of being used or dropped.
TEST(Ownership, PlanAndApplyLeaveAnotherApplicationsScratchNamedTablesAlone) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1 = testing::WriteTempFile("v1.yaml", ArticleText(schema, {}));
  // Adds the collection book_titles; rebuilds nothing else.
  const std::string v2 = testing::WriteTempFile("v2.yaml", ArticleText(schema, {&Changes()[1]}));
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, SourcePath("tests/data/article/events.jsonl")},
                          &output))
      << output;
  for (const char* table : {"jobs__plan", "jobs__next"}) {
    Sql("create table " + schema + "." + table + " (id int primary key, note text)");
    Sql("insert into " + schema + "." + table + " values (1, 'the application''s row')");
  }
  const std::vector<std::string> row = {"1\tthe application's row"};

  testing::CommandResult plan = Denormd({"plan", "-c", v2});
  ASSERT_EQ(3, plan.code) << plan.out << plan.err;
  EXPECT_EQ(row, Sql("select * from " + schema + ".jobs__plan"));
  EXPECT_EQ(row, Sql("select * from " + schema + ".jobs__next"));
  // status does not call them leftovers of denormd's.
  testing::CommandResult status = Denormd({"status", "-c", v1});
  EXPECT_EQ(std::string::npos, status.out.find("jobs__")) << status.out;

  // A killed apply leaves its own __next tables; the next apply removes
  // those and only those.
  testing::CommandResult killed = testing::RunDenormdWith(
      {{"DENORMD_POSTGRES", testing::TestPostgresUrl()}, {"DENORMD_CRASH_AT", "apply_built"}},
      {"apply", "-c", v2});
  ASSERT_NE(0, killed.code);
  EXPECT_EQ(std::vector<std::string>{"1"},
            Sql("select count(*) from pg_tables where schemaname = '" + schema +
                "' and tablename = 'book_titles__next'"));
  testing::CommandResult applied = Denormd({"apply", "-c", v2});
  ASSERT_EQ(0, applied.code) << applied.out << applied.err;
  EXPECT_NE(std::string::npos, applied.out.find("removed what an unfinished apply left"))
      << applied.out;
  EXPECT_EQ(row, Sql("select * from " + schema + ".jobs__plan"));
  EXPECT_EQ(row, Sql("select * from " + schema + ".jobs__next"));
  EXPECT_EQ(std::vector<std::string>{"0"},
            Sql("select count(*) from pg_tables where schemaname = '" + schema +
                "' and tablename = 'book_titles__next'"));
}

TEST(Ownership, APlanThatWouldBuildIntoAnotherApplicationsTableIsRefused) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1 = testing::WriteTempFile("v1.yaml", ArticleText(schema, {}));
  const std::string v2 = testing::WriteTempFile("v2.yaml", ArticleText(schema, {&Changes()[1]}));
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, SourcePath("tests/data/article/events.jsonl")},
                          &output))
      << output;
  Sql("create table " + schema + ".book_titles__plan (id int primary key, note text)");
  Sql("insert into " + schema + ".book_titles__plan values (1, 'kept')");
  testing::CommandResult plan = Denormd({"plan", "-c", v2});
  EXPECT_EQ(2, plan.code) << plan.out << plan.err;
  EXPECT_NE(std::string::npos, plan.err.find("did not create (book_titles__plan)")) << plan.err;
  EXPECT_EQ(std::vector<std::string>{"1\tkept"},
            Sql("select * from " + schema + ".book_titles__plan"));
}

// The advisory lock's holder, by pg_locks (another connection than ours).
std::vector<std::string> LockHolders(const std::string& schema) {
  const uint64_t key = static_cast<uint64_t>(PostgresAdministrationLock::Key(schema));
  return Sql("select pid from pg_locks where locktype = 'advisory' and granted and classid = " +
             std::to_string(key >> 32) + " and objid = " + std::to_string(key & 0xffffffffu));
}

// One lock for apply, rebuild and plan: a rebuild with another file while
// an apply builds is refused (it would bump the epoch under the apply), and
// the apply switches to its own model.
TEST(AdministrationLock, ARebuildWithAnotherFileDuringAnApplyIsRefused) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1 = testing::WriteTempFile("v1.yaml", ArticleText(schema, {}));
  const std::string v2_text = ArticleText(schema, {&Changes()[1]});
  const std::string other = testing::WriteTempFile("other.yaml", ArticleText(schema, {&Changes()[4]}));
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, SourcePath("tests/data/article/events.jsonl")},
                          &output))
      << output;
  ReconfigureOptions options;
  options.postgres = testing::TestPostgresUrl();
  testing::CommandResult rebuild;
  options.at_step = [&](const char* step) {
    if (std::string(step) == "apply_built") rebuild = Denormd({"rebuild", "-c", other});
  };
  ReconfigureReport report;
  const Config target = Parse(v2_text);
  Status status = Reconfigure(target, options, &report);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(1, rebuild.code) << rebuild.out << rebuild.err;
  EXPECT_NE(std::string::npos, rebuild.err.find("is running on schema " + schema)) << rebuild.err;
  EXPECT_EQ(std::vector<std::string>{"2"},
            Sql("select value from " + schema + ".meta where key = 'epoch'"));
  EXPECT_EQ(std::vector<std::string>{ModelFingerprint(target)},
            Sql("select value from " + schema + ".meta where key = 'model_fingerprint'"));
  EXPECT_EQ(std::vector<std::string>{}, LockHolders(schema));  // released
}

// While a rebuild holds the lock (here: taken the way rebuild takes it), a
// plan is refused before it touches the index rows the rebuild builds; an
// apply and another rebuild too.
TEST(AdministrationLock, APlanDuringARebuildIsRefusedAndTouchesNothing) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1_text = ArticleText(schema, {});
  const std::string v1 = testing::WriteTempFile("v1.yaml", v1_text);
  const std::string v2 = testing::WriteTempFile("v2.yaml", ArticleText(schema, {&Changes()[2]}));
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, SourcePath("tests/data/article/events.jsonl")},
                          &output))
      << output;
  const std::vector<std::string> refs = Sql("select * from " + schema + ".refs order by 1, 2, 3, 4, 5");
  ASSERT_FALSE(refs.empty());
  {
    std::unique_ptr<AdministrationLock> rebuilding;
    ASSERT_TRUE(PostgresAdministrationLock::Acquire(Parse(v1_text), testing::TestPostgresUrl(), "rebuild",
                                            &rebuilding)
                    .ok());
    EXPECT_EQ(1u, LockHolders(schema).size());
    for (const std::vector<std::string>& command :
         {std::vector<std::string>{"plan", "-c", v2}, {"apply", "-c", v2}, {"rebuild", "-c", v1}}) {
      testing::CommandResult refused = Denormd(command);
      EXPECT_EQ(1, refused.code) << command[0] << ": " << refused.out << refused.err;
      EXPECT_NE(std::string::npos, refused.err.find("is running on schema " + schema))
          << command[0] << ": " << refused.err;
    }
    EXPECT_EQ(refs, Sql("select * from " + schema + ".refs order by 1, 2, 3, 4, 5"));
    EXPECT_EQ(std::vector<std::string>{"0"},
              Sql("select count(*) from pg_tables where schemaname = '" + schema +
                  "' and tablename like '%\\_\\_plan'"));
    EXPECT_EQ(std::vector<std::string>{"1"},
              Sql("select value from " + schema + ".meta where key = 'epoch'"));
  }
  // Released: the plan runs.
  EXPECT_EQ(3, Denormd({"plan", "-c", v2}).code);
}

// The lock's connection killed mid-build: the lock is gone, and the apply
// stops without switching (the epoch and model stay).
TEST(AdministrationLock, ALostLockAbortsTheApply) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1_text = ArticleText(schema, {});
  const std::string v1 = testing::WriteTempFile("v1.yaml", v1_text);
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, SourcePath("tests/data/article/events.jsonl")},
                          &output))
      << output;
  ReconfigureOptions options;
  options.postgres = testing::TestPostgresUrl();
  std::vector<std::string> killed;
  options.at_step = [&](const char* step) {
    if (std::string(step) != "apply_built") return;
    killed = LockHolders(schema);
    for (const std::string& pid : killed) Sql("select pg_terminate_backend(" + pid + ")");
  };
  ReconfigureReport report;
  Status status = Reconfigure(Parse(ArticleText(schema, {&Changes()[1]})), options, &report);
  EXPECT_EQ(1u, killed.size());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(std::string::npos, status.message().find("lost the administration lock"))
      << status.ToString();
  EXPECT_EQ(std::vector<std::string>{"1"},
            Sql("select value from " + schema + ".meta where key = 'epoch'"));
  EXPECT_EQ(std::vector<std::string>{ModelFingerprint(Parse(v1_text))},
            Sql("select value from " + schema + ".meta where key = 'model_fingerprint'"));
  EXPECT_EQ(0, RunDenormd({"verify", "-c", v1}, &output)) << output;
}

// The epoch moved under the apply (a writer that bypassed the lock): the
// switch is only from the epoch the apply read, so nothing switches.
TEST(AdministrationLock, TheSwitchIsOnlyFromTheEpochTheApplyRead) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1_text = ArticleText(schema, {});
  const std::string v1 = testing::WriteTempFile("v1.yaml", v1_text);
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, SourcePath("tests/data/article/events.jsonl")},
                          &output))
      << output;
  ReconfigureOptions options;
  options.postgres = testing::TestPostgresUrl();
  options.at_step = [&](const char* step) {
    if (std::string(step) == "apply_caught_up") {
      Sql("update " + schema + ".meta set value = '7' where key = 'epoch'");
    }
  };
  ReconfigureReport report;
  Status status = Reconfigure(Parse(ArticleText(schema, {&Changes()[1]})), options, &report);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(std::vector<std::string>{"7"},
            Sql("select value from " + schema + ".meta where key = 'epoch'"));
  EXPECT_EQ(std::vector<std::string>{ModelFingerprint(Parse(v1_text))},
            Sql("select value from " + schema + ".meta where key = 'model_fingerprint'"));
}

// The journal is taken in bounded pages: with a page of 7 changes, the
// catch-up round takes 7 and the switch the rest page by page; the result is
// exactly a fresh replay.
TEST(ApplyJournal, IsTakenInBoundedPages) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1 = testing::WriteTempFile("v1.yaml", ArticleText(schema, {}));
  const std::string v2_text = ArticleText(schema, {&Changes()[2], &Changes()[4]});
  const std::string log = SourcePath("tests/data/article/events-random.jsonl");
  const std::string first = LogSlice(log, 0, 2000, "first.jsonl");
  const std::string second = LogSlice(log, 2000, 2800, "second.jsonl");
  const std::string third = LogSlice(log, 2800, 100000, "third.jsonl");
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, first}, &output)) << output;
  ReconfigureOptions options;
  options.postgres = testing::TestPostgresUrl();
  options.journal_page = 7;
  std::vector<std::string> lines;
  options.progress = [&](const std::string& line) { lines.push_back(line); };
  options.at_step = [&](const char* step) {
    std::string out;
    if (std::string(step) == "apply_built") {
      EXPECT_EQ(0, RunDenormd({"replay", "-c", v1, second}, &out)) << out;
    }
    if (std::string(step) == "apply_caught_up") {
      EXPECT_EQ(0, RunDenormd({"replay", "-c", v1, third}, &out)) << out;
    }
  };
  const std::vector<std::string> journaled_before = Sql("select count(*) from " + schema + ".apply_journal");
  ReconfigureReport report;
  const Config target = Parse(v2_text);
  Status status = Reconfigure(target, options, &report);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(std::vector<std::string>{"0"}, journaled_before);
  EXPECT_GT(report.journal_changes, 7u * 3);
  const std::string round = "catch-up round 1: 7 changes";
  EXPECT_NE(lines.end(), std::find(lines.begin(), lines.end(), round)) << Joined(lines);
  EXPECT_EQ(std::vector<std::string>{"0"}, Sql("select count(*) from " + schema + ".apply_journal"));
  EXPECT_EQ("", Joined(DiffDocumentSets(Read(target), FreshReplay(v2_text, schema, {log}))));
}

// A killed apply's `applying` mark: status calls it stale, batches journal
// for it, and `denormd prune` removes the mark, the journal and the apply's
// __next tables when no apply holds the lock (and leaves them while one does).
TEST(ApplyJournal, AStaleApplyingMarkIsShownAndClearedByPrune) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1_text = ArticleText(schema, {});
  const std::string v1 = testing::WriteTempFile("v1.yaml", v1_text);
  const std::string v2 = testing::WriteTempFile("v2.yaml", ArticleText(schema, {&Changes()[2]}));
  const std::string log = SourcePath("tests/data/article/events-random.jsonl");
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, LogSlice(log, 0, 2000, "first.jsonl")}, &output))
      << output;
  testing::CommandResult killed = testing::RunDenormdWith(
      {{"DENORMD_POSTGRES", testing::TestPostgresUrl()}, {"DENORMD_CRASH_AT", "apply_built"}},
      {"apply", "-c", v2});
  ASSERT_NE(0, killed.code);
  // Batches go on journaling for the dead apply.
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, LogSlice(log, 2000, 2500, "second.jsonl")}, &output))
      << output;
  const uint64_t journaled = testing::SqlCount("select count(*) from " + schema + ".apply_journal");
  EXPECT_GT(journaled, 0u);
  testing::CommandResult status = Denormd({"status", "-c", v1});
  EXPECT_NE(std::string::npos, status.out.find("stale, no apply holds the lock")) << status.out;

  {
    // While an apply holds the lock, the mark is its own: status says it is
    // building and prune leaves it.
    std::unique_ptr<AdministrationLock> applying;
    ASSERT_TRUE(PostgresAdministrationLock::Acquire(Parse(v1_text), testing::TestPostgresUrl(), "apply",
                                            &applying)
                    .ok());
    EXPECT_NE(std::string::npos, Denormd({"status", "-c", v1}).out.find("an apply is building ("));
    testing::CommandResult kept = Denormd({"prune", "-c", v1});
    EXPECT_EQ(0, kept.code) << kept.err;
    EXPECT_EQ(std::string::npos, kept.out.find("interrupted apply")) << kept.out;
    EXPECT_EQ(std::vector<std::string>{"1"},
              Sql("select count(*) from " + schema + ".meta where key = 'applying'"));
  }

  testing::CommandResult pruned = Denormd({"prune", "-c", v1});
  ASSERT_EQ(0, pruned.code) << pruned.err;
  EXPECT_NE(std::string::npos,
            pruned.out.find("removed an interrupted apply's mark, its " + std::to_string(journaled) +
                            " journal rows"))
      << pruned.out;
  EXPECT_EQ(std::vector<std::string>{"0"},
            Sql("select count(*) from " + schema + ".meta where key = 'applying'"));
  EXPECT_EQ(std::vector<std::string>{"0"}, Sql("select count(*) from " + schema + ".apply_journal"));
  EXPECT_EQ(std::vector<std::string>{"0"},
            Sql("select count(*) from pg_tables where schemaname = '" + schema +
                "' and tablename like '%\\_\\_next'"));
  // No more journaling; the old model serves, exact.
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, LogSlice(log, 2500, 3000, "third.jsonl")}, &output))
      << output;
  EXPECT_EQ(std::vector<std::string>{"0"}, Sql("select count(*) from " + schema + ".apply_journal"));
  EXPECT_EQ(std::vector<std::string>{"1"},
            Sql("select value from " + schema + ".meta where key = 'epoch'"));
  EXPECT_EQ(0, RunDenormd({"verify", "-c", v1}, &output)) << output;
  // And the next apply works from there.
  testing::CommandResult applied = Denormd({"apply", "-c", v2});
  EXPECT_EQ(0, applied.code) << applied.out << applied.err;
}

// rebuild records its model only from the epoch its Open read: one that
// moved meanwhile (an apply switched) is not overwritten.
TEST(AdministrationLock, RebuildRecordsItsModelOnlyFromTheEpochItRead) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1_text = ArticleText(schema, {});
  const std::string v1 = testing::WriteTempFile("v1.yaml", v1_text);
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, SourcePath("tests/data/article/events.jsonl")},
                          &output))
      << output;
  Config other = Parse(ArticleText(schema, {&Changes()[4]}));
  other.store.postgres = testing::TestPostgresUrl();
  Engine engine(other, testing::TestPostgresUrl());
  ASSERT_TRUE(engine.store.Open(PostgresStore::OpenMode::kBuild).ok());
  Sql("update " + schema + ".meta set value = '5' where key = 'epoch'");
  Status recorded = engine.store.RecordModel();
  EXPECT_TRUE(recorded.IsStaleConfig()) << recorded.ToString();
  EXPECT_NE(std::string::npos, recorded.message().find("epoch is no longer 1")) << recorded.message();
  EXPECT_EQ(std::vector<std::string>{"5"},
            Sql("select value from " + schema + ".meta where key = 'epoch'"));
  EXPECT_EQ(std::vector<std::string>{ModelFingerprint(Parse(v1_text))},
            Sql("select value from " + schema + ".meta where key = 'model_fingerprint'"));
}

// A real rebuild, held inside its reindex (the test's transaction holds the
// index table), has taken the lock before reading the model: a plan started
// then is refused and deletes no index row; the rebuild then finishes.
TEST(AdministrationLock, APlanDuringARunningRebuildIsRefused) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1 = testing::WriteTempFile("v1.yaml", ArticleText(schema, {}));
  const std::string v2 = testing::WriteTempFile("v2.yaml", ArticleText(schema, {&Changes()[2]}));
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, SourcePath("tests/data/article/events.jsonl")},
                          &output))
      << output;
  const std::vector<std::string> refs =
      Sql("select * from " + schema + ".refs order by 1, 2, 3, 4, 5");
  pqxx::connection holder(testing::TestPostgresUrl());
  auto hold = std::make_unique<pqxx::work>(holder);
  hold->exec("lock table " + schema + ".refs in access exclusive mode");
  testing::CommandResult rebuild;
  std::thread rebuilding([&] { rebuild = Denormd({"rebuild", "-c", v1}); });
  // The rebuild holds the administration lock (and waits for the table).
  const bool locked = testing::WaitUntil([&] { return LockHolders(schema).size() == 1; }, 30);
  testing::CommandResult plan;
  if (locked) plan = Denormd({"plan", "-c", v2});
  hold->abort();
  hold.reset();
  rebuilding.join();
  ASSERT_TRUE(locked);
  EXPECT_EQ(1, plan.code) << plan.out << plan.err;
  EXPECT_NE(std::string::npos, plan.err.find("is running on schema " + schema)) << plan.err;
  EXPECT_EQ(0, rebuild.code) << rebuild.out << rebuild.err;
  EXPECT_EQ(refs, Sql("select * from " + schema + ".refs order by 1, 2, 3, 4, 5"));
  EXPECT_EQ(0, RunDenormd({"verify", "-c", v1}, &output)) << output;
}

// The lock's connection of a running rebuild killed: the rebuild stops
// before it records anything (the model and epoch stay).
TEST(AdministrationLock, ARebuildThatLostItsLockRecordsNothing) {
  const std::string schema = testing::TestSchemaName();
  Sql("drop schema if exists " + schema + " cascade");
  const std::string v1_text = ArticleText(schema, {});
  const std::string v1 = testing::WriteTempFile("v1.yaml", v1_text);
  const std::string other = testing::WriteTempFile("other.yaml", ArticleText(schema, {&Changes()[4]}));
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", v1, SourcePath("tests/data/article/events.jsonl")},
                          &output))
      << output;
  pqxx::connection holder(testing::TestPostgresUrl());
  auto hold = std::make_unique<pqxx::work>(holder);
  hold->exec("lock table " + schema + ".refs in access exclusive mode");
  testing::CommandResult rebuild;
  std::thread rebuilding([&] { rebuild = Denormd({"rebuild", "-c", other}); });
  std::vector<std::string> holders;
  testing::WaitUntil([&] { return (holders = LockHolders(schema)).size() == 1; }, 30);
  for (const std::string& pid : holders) Sql("select pg_terminate_backend(" + pid + ")");
  hold->abort();
  hold.reset();
  rebuilding.join();
  ASSERT_EQ(1u, holders.size());
  EXPECT_EQ(1, rebuild.code) << rebuild.out << rebuild.err;
  EXPECT_NE(std::string::npos, rebuild.err.find("lost the administration lock")) << rebuild.err;
  EXPECT_EQ(std::vector<std::string>{"1"},
            Sql("select value from " + schema + ".meta where key = 'epoch'"));
  EXPECT_EQ(std::vector<std::string>{ModelFingerprint(Parse(v1_text))},
            Sql("select value from " + schema + ".meta where key = 'model_fingerprint'"));
}

}  // namespace
}  // namespace denormd

namespace denormd {
namespace {

// issue 29, point 7: a collection `apply` drops is not published as deletes;
// plan (and apply) warn when the feed publishes it, and say nothing without a
// feed.
TEST(ApplyWarnings, ADroppedCollectionThatTheFeedPublishesIsNamed) {
  const std::string schema = testing::TestSchemaName();
  testing::Sql("drop schema if exists " + schema + " cascade");
  const ConfigChange* remove = nullptr;
  for (const ConfigChange& change : Changes()) {
    if (std::string(change.name) == "RemoveProjection") remove = &change;
  }
  ASSERT_NE(nullptr, remove);
  const std::string feed = "feed: {topic: article.documents, brokers: 127.0.0.1:9}\n";
  const std::string v1 = testing::WriteTempFile("v1.yaml", ArticleText(schema, {}) + feed);
  const std::string v2 = testing::WriteTempFile("v2.yaml", ArticleText(schema, {remove}) + feed);
  const std::string quiet = testing::WriteTempFile("v2-nofeed.yaml", ArticleText(schema, {remove}));
  std::string output;
  ASSERT_EQ(0, testing::RunDenormd(
                   {"replay", "-c", v1, SourcePath("tests/data/article/events-random.jsonl")},
                   &output))
      << output;
  testing::CommandResult plan = Denormd({"plan", "-c", v2});
  EXPECT_EQ(3, plan.code) << plan.out << plan.err;
  EXPECT_NE(std::string::npos,
            plan.out.find("warning: collection portfolios is on the change feed (topic "
                          "article.documents); dropping it publishes no deletes, so its "))
      << plan.out;
  testing::CommandResult json = Denormd({"plan", "-c", v2, "--json"});
  EXPECT_NE(std::string::npos, json.out.find("\"warnings\":[\"collection portfolios is on the "))
      << json.out;
  testing::CommandResult without = Denormd({"plan", "-c", quiet});
  EXPECT_EQ(3, without.code) << without.out << without.err;
  EXPECT_EQ(std::string::npos, without.out.find("warning:")) << without.out;
}

}  // namespace
}  // namespace denormd
