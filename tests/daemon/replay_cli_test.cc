// The denormd binary end to end on the real PostgreSQL: replay resumes, a
// kill -9 mid-replay loses nothing, verify finds a corrupted document and
// rebuild repairs it, check lists config errors.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <regex>

#include <gtest/gtest.h>

#include "projections/json.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::RunDenormd;
using testing::SourcePath;
using testing::Sql;

// A copy of the article config with the test's own schema.
// Replays the article's events.jsonl with `config_file`.
void ReplayArticleEvents(const std::string& config_file) {
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", config_file,
                           SourcePath("tests/data/article/events.jsonl")},
                          &output))
      << output;
}

TEST(ReplayCli, SecondRunAppliesNothingAndSaysSo) {
  Config config;
  std::string config_file = testing::ArticleConfigFile(&config);
  std::string events = SourcePath("tests/data/article/events.jsonl");
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", config_file, events}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("286 events")) << output;
  EXPECT_NE(std::string::npos, output.find("2 stale, 7 dead letters")) << output;

  ASSERT_EQ(0, RunDenormd({"replay", "-c", config_file, events}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("nothing to apply: already applied up to line 286"))
      << output;
  EXPECT_EQ(std::vector<std::string>({"7"}),
            Sql("select count(*) from " + config.store.schema + ".dead_letters"));
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(config),
                                         SourcePath("tests/data/article/expected.json")));
}

// `status` says in words what each figure of a stream is: the next line it
// reads (the log's lines, counted here, plus one) and the events applied,
// stale and dead (the same counts as the positions table, read with SQL).
TEST(StatusCli, SaysWhatEachFigureOfAStreamIs) {
  Config config;
  std::string config_file = testing::ArticleConfigFile(&config);
  ReplayArticleEvents(config_file);
  const std::string text = testing::ReadFile(SourcePath("tests/data/article/events.jsonl"));
  const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  const std::vector<std::string> counts =
      Sql("select applied, stale, dead from " + config.store.schema + ".positions");
  ASSERT_EQ(1u, counts.size());
  std::string output;
  ASSERT_EQ(0, RunDenormd({"status", "-c", config_file}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("the next offset or line denormd reads")) << output;
  std::string applied = counts[0].substr(0, counts[0].find('\t'));
  std::string rest = counts[0].substr(counts[0].find('\t') + 1);
  const std::string stale = rest.substr(0, rest.find('\t'));
  const std::string dead = rest.substr(rest.find('\t') + 1);
  EXPECT_NE(std::string::npos, output.find(" partition 0: next offset " + std::to_string(lines + 1) +
                                           "; applied " + applied + ", stale " + stale +
                                           ", dead " + dead + "\n"))
      << output;
}

// `advise --json` on the article's store: its fan-out and document sizes
// equal what plain SQL over the stored source and documents counts.
TEST(AdviseCli, FiguresEqualPlainSqlOverTheStore) {
  Config config;
  std::string config_file = testing::ArticleConfigFile(&config);
  ReplayArticleEvents(config_file);
  std::string output;
  ASSERT_EQ(0, RunDenormd({"advise", "-q", "-c", config_file, "--json"}, &output)) << output;
  JsonDocument json;
  ASSERT_TRUE(ParseJson(output.substr(output.find('{')), &json).ok()) << output;
  const std::string s = config.store.schema;
  auto field = [&](const std::string& projection, const std::string& name) -> const JsonValue& {
    for (const JsonValue& f : json["fields"].GetArray()) {
      if (projection == f["projection"].GetString() && name == f["field"].GetString()) return f;
    }
    ADD_FAILURE() << "no " << projection << "." << name << " in " << output;
    return json;
  };
  // Books per author and the most of them, over the live books' authorIds.
  const std::string books_per_author =
      "select a, count(*) n from " + s + ".entities e, jsonb_array_elements_text(e.data->'authorIds') a"
      " where e.type = 'book' and not e.deleted group by a";
  const JsonValue& count = field("authors", "countOfBooks");
  EXPECT_EQ(Sql("select count(*) from (" + books_per_author + ") x")[0],
            std::to_string(count["members_per_document"]["keys"].GetUint64()));
  EXPECT_EQ(Sql("select max(n) from (" + books_per_author + ") x")[0],
            std::to_string(count["members_per_document"]["max"].GetUint64()));
  const JsonValue& lookup = field("books", "authors");
  EXPECT_EQ(Sql("select max(n) from (" + books_per_author + ") x")[0],
            std::to_string(lookup["documents_per_member"]["max"].GetUint64()));
  // Comments per post.
  const JsonValue& embed = field("posts", "recentComments");
  EXPECT_EQ(Sql("select max(n) from (select e.data->>'postId', count(*) n from " + s +
                ".entities e where e.type = 'comment' and not e.deleted group by 1) x")[0],
            std::to_string(embed["members_per_document"]["max"].GetUint64()));
  EXPECT_EQ(3u, embed["limit"].GetUint64());
  // The largest document of each collection, in bytes of its stored JSON.
  for (const JsonValue& c : json["collections"].GetArray()) {
    const std::string collection = c["collection"].GetString();
    const std::string projection = c["projection"].GetString();
    EXPECT_EQ(Sql("select coalesce(max(octet_length(doc::text)), 0) from " + s + "." + collection +
                  " where projection = '" + projection + "'")[0],
              std::to_string(c["bytes"]["max"].GetUint64()))
        << collection;
  }
  // The text report names the hottest author and says nothing needs changing
  // at the default thresholds.
  ASSERT_EQ(0, RunDenormd({"advise", "-q", "-c", config_file}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("books documents per author (what one change of it "
                                           "rewrites): p50 "))
      << output;
  EXPECT_NE(std::string::npos, output.find("none: every figure is within its threshold")) << output;
}

// What changes cost, through the binary on PostgreSQL: with
// limits.fanout_warn at 2, replay logs a fanout_large line for each change
// that recomputed more than 2 documents; the statistics it keeps hold the
// same largest change per type that status and advise show, and their
// changes per type add up to the entities the log made (one change each:
// the log is one batch).
TEST(FanOutCli, ReplayWarnsAndKeepsWhatStatusAndAdviseShow) {
  Config config;
  std::string config_file = testing::ArticleConfigFile(&config);
  config_file = testing::WriteTempFile(
      "config.yaml", testing::ReadFile(config_file) + "limits: {fanout_warn: 2}\n");
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", config_file, SourcePath("tests/data/article/events.jsonl")},
                          &output))
      << output;
  // The largest warned change of each type, from the log lines.
  std::map<std::string, uint64_t> warned;
  const std::regex line(R"(event=fanout_large type=(\w+) id=\S+ changed=\S+ documents=(\d+) fanout_warn=2)");
  for (std::sregex_iterator it(output.begin(), output.end(), line), end; it != end; ++it) {
    uint64_t& most = warned[(*it)[1]];
    most = std::max<uint64_t>(most, std::stoull((*it)[2]));
  }
  ASSERT_FALSE(warned.empty()) << output;
  for (const auto& entry : warned) EXPECT_GT(entry.second, 2u);
  const std::string s = config.store.schema;
  for (const auto& entry : warned) {
    EXPECT_EQ(std::vector<std::string>({std::to_string(entry.second)}),
              Sql("select max(max_documents) from " + s + ".fanout_stats where type = '" +
                  entry.first + "'"))
        << entry.first;
  }
  // One change per live entity the batch made (types with changes counted).
  EXPECT_EQ(Sql("select count(*) from " + s + ".entities where not deleted and type in"
                " (select type from " + s + ".fanout_stats)"),
            Sql("select sum(changes) from " + s + ".fanout_stats where field = '(created)'"));
  ASSERT_EQ(0, RunDenormd({"status", "-c", config_file}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("largest fan-out this hour and the last")) << output;
  const auto book = warned.find("book");
  ASSERT_NE(warned.end(), book);
  EXPECT_NE(std::string::npos, output.find("  book.(created): " + std::to_string(book->second) +
                                           " documents at most"))
      << output;
  ASSERT_EQ(0, RunDenormd({"advise", "-q", "-c", config_file}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("book.(created): ")) << output;
  EXPECT_NE(std::string::npos, output.find("at most " + std::to_string(book->second) + " (book "))
      << output;
}

TEST(ReplayCli, KillNineMidReplayThenRerunEndsExact) {
  Config config;
  std::string config_file = testing::ArticleConfigFile(&config);
  std::string events = SourcePath("tests/data/article/events-random.jsonl");
  const std::string positions = "select coalesce(max(position), 0) from " +
                                config.store.schema + ".positions";
  std::string output;
  ASSERT_EQ(0, RunDenormd({"status", "-c", config_file}, &output)) << output;  // creates tables
  std::mt19937 random(20261125);
  int64_t killed_at_least = 0;
  for (int round = 0; round < 4; ++round) {
    int64_t before = 0;
    std::vector<std::string> rows = Sql(positions);
    if (!rows.empty()) before = std::atoll(rows[0].c_str());
    // Small batches make many commits, so the kill lands between and inside them.
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      setenv("DENORMD_POSTGRES", config.store.postgres.c_str(), 1);
      execl(DENORMD_BINARY, DENORMD_BINARY, "replay", "-q", "-c", config_file.c_str(),
            "--batch-size", "3", events.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // Wait until this run has committed a random number of further lines,
    // then kill it without warning.
    int64_t target = before + 50 + static_cast<int64_t>(random() % 400);
    int status = 0;
    bool exited = false;
    while (!exited) {
      rows = Sql(positions);
      int64_t now = rows.empty() ? 0 : std::atoll(rows[0].c_str());
      if (now >= target) break;
      exited = waitpid(child, &status, WNOHANG) == child;
      usleep(2000);
    }
    if (!exited) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      killed_at_least++;
    }
  }
  EXPECT_GE(killed_at_least, 3) << "the replay finished before it could be killed";
  ASSERT_EQ(0, RunDenormd({"replay", "-c", config_file, events}, &output)) << output;
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(config),
                                         SourcePath("tests/data/article/expected-random.json")));
  // No event counted twice: stale and dead totals are those of one clean run.
  EXPECT_EQ(std::vector<std::string>({"59\t7\t3343"}),
            Sql("select sum(stale), sum(dead), max(position) from " + config.store.schema +
                ".positions"));
  EXPECT_EQ(std::vector<std::string>({"7"}),
            Sql("select count(*) from " + config.store.schema + ".dead_letters"));
}

TEST(VerifyCli, NamesACorruptedDocumentAndRebuildRepairsIt) {
  Config config;
  std::string config_file = testing::ArticleConfigFile(&config);
  ASSERT_NO_FATAL_FAILURE(ReplayArticleEvents(config_file));
  std::string output;
  ASSERT_EQ(0, RunDenormd({"verify", "-c", config_file}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("all documents match")) << output;

  const std::string& s = config.store.schema;
  Sql("update " + s + ".books set doc = jsonb_set(doc, '{authors,0,name}', '\"Someone Else\"')"
      " where id = 'b1'");
  Sql("delete from " + s + ".authors where id = 'a3'");
  Sql("insert into " + s + ".posts (id, doc, projection) values ('ghost', '{\"id\": \"ghost\"}', "
      "'posts')");
  ASSERT_EQ(1, RunDenormd({"verify", "-c", config_file}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("books (books) b1: differs")) << output;
  EXPECT_NE(std::string::npos, output.find("Someone Else")) << output;
  EXPECT_NE(std::string::npos, output.find("authors (authors) a3: missing")) << output;
  EXPECT_NE(std::string::npos, output.find("posts (posts) ghost: unexpected")) << output;
  EXPECT_NE(std::string::npos, output.find("3 differences")) << output;

  // Verify of one projection looks only there.
  ASSERT_EQ(0, RunDenormd({"verify", "-c", config_file, "people"}, &output)) << output;

  ASSERT_EQ(0, RunDenormd({"rebuild", "-c", config_file}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("2 documents written, 1 deleted")) << output;
  ASSERT_EQ(0, RunDenormd({"verify", "-c", config_file}, &output)) << output;
  EXPECT_EQ("", testing::DiffCollections(testing::ReadCollections(config),
                                         SourcePath("tests/data/article/expected.json")));
}

TEST(RebuildCli, ChangedRelationsAreRefusedUntilRebuildReindexes) {
  Config config;
  std::string config_file = testing::ArticleConfigFile(&config);
  ASSERT_NO_FATAL_FAILURE(ReplayArticleEvents(config_file));
  std::string output;
  // The same store, with the recent comments now ordered oldest first: the
  // index holds no rows for that order yet.
  std::string text = testing::ReadFile(config_file);
  size_t at = text.find("order_by: -createdAt");
  ASSERT_NE(std::string::npos, at);
  text.replace(at, std::string("order_by: -createdAt").size(), "order_by: createdAt");
  std::string changed = testing::WriteTempFile("changed.yaml", text);
  // The store runs the first file's projections: the changed file is refused,
  // naming plan and apply.
  EXPECT_EQ(2, RunDenormd({"replay", "-c", changed, SourcePath("tests/data/article/events.jsonl")},
                          &output));
  // The hint names the binary as it was run (here by its path), so that it
  // can be copied as it is.
  EXPECT_NE(std::string::npos, output.find("`" DENORMD_BINARY " apply -c " + changed)) << output;
  EXPECT_EQ(2, RunDenormd({"verify", "-c", changed}, &output));

  // Offline, rebuild reindexes and makes the file's projections the store's.
  ASSERT_EQ(0, RunDenormd({"rebuild", "-c", changed}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("entities reindexed")) << output;
  ASSERT_EQ(0, RunDenormd({"verify", "-c", changed}, &output)) << output;
  EXPECT_EQ(2, RunDenormd({"verify", "-c", config_file}, &output)) << output;
  std::vector<std::string> oldest = Sql("select doc->'recentComments'->0->>'id' from " +
                                        config.store.schema + ".posts where id = 'p1'");
  EXPECT_EQ(std::vector<std::string>({"c0001"}), oldest);
}

TEST(VerifyCli, UnknownProjectionIsAUsageError) {
  Config config;
  std::string config_file = testing::ArticleConfigFile(&config);
  std::string output;
  EXPECT_EQ(2, RunDenormd({"verify", "-c", config_file, "nosuch"}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("no projection named \"nosuch\"")) << output;
}

TEST(CheckCli, ListsEveryErrorWithItsPlaceAndExitsNonZero) {
  std::string bad = testing::WriteTempFile("bad.yaml", R"(store: {schema: library}
entities: [author, book]
projections:
  authors:
    from: author
    fields:
      countOfBooks: {count: book}
      books: {ids: dragon, via: authorIds}
  books:
    from: book
    collection: shared
    fields:
      authors: {lookup: author, by: authorIds, selec: [id]}
      title: "{name"
  others:
    from: author
    collection: shared
)");
  std::string output;
  EXPECT_EQ(2, RunDenormd({"check", "-c", bad}, &output));
  for (const char* expected : {"bad.yaml:7:", "via", "bad.yaml:8:", "dragon", "bad.yaml:13:",
                               "did you mean \"select\"", "bad.yaml:14:", "partition"}) {
    EXPECT_NE(std::string::npos, output.find(expected)) << expected << " in\n" << output;
  }
  std::string good = SourcePath("tests/data/article/config.yaml");
  EXPECT_EQ(0, RunDenormd({"check", "-c", good}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("ok: 10 entity types, 10 projections")) << output;
  // The worked example of docs/configuration.md, "Changing projections".
  EXPECT_EQ(0, RunDenormd({"check", "-c", SourcePath("tests/data/article/config-v2.yaml")}, &output))
      << output;
  EXPECT_NE(std::string::npos, output.find("ok: 10 entity types, 9 projections")) << output;
}

TEST(Cli, HelpTeachesAndBadUsageExitsTwo) {
  std::string output;
  EXPECT_EQ(0, RunDenormd({"--help"}, &output));
  for (const char* expected : {"run", "replay", "rebuild", "verify", "status", "check",
                               "--batch-size", "Examples:"}) {
    EXPECT_NE(std::string::npos, output.find(expected)) << expected;
  }
  EXPECT_EQ(2, RunDenormd({"explode"}, &output));
  EXPECT_NE(std::string::npos, output.find("unknown command \"explode\"")) << output;
  EXPECT_EQ(2, RunDenormd({"replay", "x.jsonl"}, &output));
  EXPECT_NE(std::string::npos, output.find("-c CONFIG is required")) << output;
  EXPECT_EQ(2, RunDenormd({"replay", "-c", "/nonexistent.yaml", "x"}, &output));
  EXPECT_NE(std::string::npos,
            output.find("/nonexistent.yaml: cannot read the config file: No such file"))
      << output;
  // Nothing of its contents to count or to look up in the docs.
  EXPECT_EQ(std::string::npos, output.find("1 error")) << output;
}

TEST(ReplayCli, UnreachableDatabaseIsAClearError) {
  Config config;
  std::string config_file = testing::ArticleConfigFile(&config);
  std::string output;
  std::string command = std::string("DENORMD_POSTGRES=postgresql://127.0.0.1:1/nowhere '") +
                        DENORMD_BINARY + "' replay -c '" + config_file + "' '" +
                        SourcePath("tests/data/article/events.jsonl") + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  int status = pclose(pipe);
  EXPECT_EQ(1, WEXITSTATUS(status)) << output;
  EXPECT_NE(std::string::npos, output.find("cannot open the store")) << output;
  // Where the URL came from, and how to give another.
  EXPECT_NE(std::string::npos, output.find("127.0.0.1:1/nowhere, from $DENORMD_POSTGRES")) << output;
  EXPECT_NE(std::string::npos, output.find("--postgres URL")) << output;
}

TEST(ReplayCli, EditedStoredBucketIsWarnedAboutAndStillExact) {
  Config config;
  std::string config_file = testing::ArticleConfigFile(&config);
  std::string load;
  for (int i = 0; i < 250; ++i) {  // buckets p:0 .. p:2
    load += R"({"type":"comment","id":"c)" + std::to_string(1000 + i) +
            R"(","op":"upsert","data":{"postId":"p","createdAt":)" + std::to_string(i) +
            R"(,"comment":"text"}})" "\n";
  }
  std::string output;
  ASSERT_EQ(0, RunDenormd({"replay", "-c", config_file, testing::WriteTempFile("load.jsonl", load)},
                          &output))
      << output;
  EXPECT_EQ(std::string::npos, output.find("bucket_tails_rendered")) << output;
  // The bucket the change touches (the stable layout reads no other).
  Sql("update " + config.store.schema + ".post_comments set doc = jsonb_set(doc, '{comments}',"
      " (doc->'comments') - 1) where id = 'p:0'");
  std::string change = testing::WriteTempFile(
      "change.jsonl", R"({"type":"comment","id":"c1000","op":"delete"})" "\n");
  ASSERT_EQ(0, RunDenormd({"replay", "-c", config_file, change}, &output)) << output;
  EXPECT_NE(std::string::npos, output.find("bucket_tails_rendered")) << output;
  EXPECT_NE(std::string::npos, output.find("denormd verify")) << output;
  EXPECT_EQ(0, RunDenormd({"verify", "-c", config_file}, &output)) << output;
}

}  // namespace
}  // namespace denormd
