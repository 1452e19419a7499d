// `denormd test` end to end, with the binary: the article logs in memory
// against their expected files at several batch sizes, --dump, --expect
// with each kind of difference, --update, stdin, the exit codes (0 match,
// 1 difference, 2 usage or config), and that nothing connects anywhere: the
// store and brokers the config and the environment name do not exist.
#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <sstream>

#include <gtest/gtest.h>

#include "daemon/test_command.h"
#include "formats/format_registry.h"
#include "projections/document_set.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::ReadFile;
using testing::SourcePath;
using testing::WriteTempFile;

using Result = testing::CommandResult;

// Runs the denormd binary; nothing it could connect to exists.
Result Denormd(const std::vector<std::string>& args, const std::string& input = "") {
  return testing::RunDenormdOffline(args, input);
}

const std::string kConfig = SourcePath("tests/data/article/config.yaml");
const std::string kEvents = SourcePath("tests/data/article/events.jsonl");
const std::string kExpected = SourcePath("tests/data/article/expected.json");

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

DocumentSet ArticleExpected() {
  DocumentSet set;
  EXPECT_TRUE(ParseDocumentSet(ReadFile(kExpected), &set).ok());
  return set;
}

TEST(TestCli, TheArticleLogsMatchTheirExpectedDocumentsAtEveryBatchSize) {
  for (const auto& files : {std::make_pair("events.jsonl", "expected.json"),
                            std::make_pair("events-random.jsonl", "expected-random.json")}) {
    const Result r = Denormd({"test", "-c", kConfig,
                              SourcePath(std::string("tests/data/article/") + files.first),
                              "--expect", SourcePath(std::string("tests/data/article/") + files.second),
                              "--batch", "1,7,5000"});
    EXPECT_EQ(0, r.code) << r.out << r.err;
    EXPECT_TRUE(Has(r.out, "batch sizes 1, 7, 5000: the same documents and counts")) << r.out;
    EXPECT_TRUE(Has(r.out, std::string(files.second) + ": the documents match")) << r.out;
    EXPECT_EQ("", r.err);
  }
  // The summary, and each dead letter with its line and reason.
  const Result r = Denormd({"test", "-c", kConfig, kEvents});
  EXPECT_EQ(0, r.code) << r.out << r.err;
  EXPECT_TRUE(Has(r.out, "test: 286 events: 277 applied, 2 stale, 7 dead letters; 21 documents "
                         "in 9 collections (batch size 5000)\n"))
      << r.out;
  EXPECT_TRUE(Has(r.out, kEvents + ":281: dead letter: unknown entity type \"dragon\"\n")) << r.out;
  EXPECT_TRUE(Has(r.out, kEvents + ":286: dead letter: an event must be a JSON object\n")) << r.out;
}

TEST(TestCli, DumpPrintsTheResultAloneOnStdoutInTheExpectedFilesFormat) {
  const Result r = Denormd({"test", "-c", kConfig, kEvents, "--dump"});
  EXPECT_EQ(0, r.code) << r.err;
  // Byte for byte the article's file (written by Python's json.dump with
  // indent=1 and sorted keys), plus a final newline.
  EXPECT_EQ(ReadFile(kExpected) + "\n", r.out);
  EXPECT_TRUE(Has(r.err, "test: 286 events")) << r.err;
  EXPECT_TRUE(Has(r.err, ":283: dead letter: op \"upsert\" needs a \"data\" object")) << r.err;
}

TEST(TestCli, ListsEachDifferenceWithItsPathAndExitsOne) {
  DocumentSet expected = ArticleExpected();
  auto& books = expected.collections["books"];
  ASSERT_TRUE(Has(books["b1"], "\"name\":\"Thomas Andersen-Smith\""));
  books["b1"].replace(books["b1"].find("Thomas Andersen-Smith"), 21, "Tom");
  books.erase("b2");
  books["b9"] = R"({"id":"b9","name":"Unwritten"})";
  expected.dead = 6;
  const std::string file = WriteTempFile("expected.json", DocumentSetJson(expected));
  const Result r = Denormd({"test", "-c", kConfig, kEvents, "--expect", file});
  EXPECT_EQ(1, r.code) << r.out << r.err;
  EXPECT_TRUE(Has(r.out, "books/b1: .authors[0].name: \"Thomas Andersen-Smith\" != \"Tom\"\n")) << r.out;
  EXPECT_TRUE(Has(r.out, "books/b2: unexpected {")) << r.out;
  EXPECT_TRUE(Has(r.out, "books/b9: missing, expected {\"id\":\"b9\",\"name\":\"Unwritten\"}\n")) << r.out;
  EXPECT_TRUE(Has(r.out, "dead letters: 7 != 6\n")) << r.out;
  EXPECT_TRUE(Has(r.out, file + ": 4 differences (this run != " + file + "); --update rewrites it\n"))
      << r.out;
}

// The article's post p1 has 248 comments in buckets of 100: p1:0..p1:2.
std::string RelaidPostComments(const std::vector<size_t>& sizes) {
  DocumentSet expected = ArticleExpected();
  auto& pages = expected.collections["post_comments"];
  std::vector<std::string> items;
  for (const std::string id : {"p1:0", "p1:1", "p1:2"}) {
    std::vector<std::string> own;
    EXPECT_TRUE(SplitArrayField(pages[id], "comments", &own)) << pages[id];
    items.insert(items.end(), own.begin(), own.end());
    pages.erase(id);
  }
  EXPECT_EQ(248u, items.size());
  size_t at = 0;
  for (size_t b = 0; b < sizes.size(); ++b) {
    // Other numbers and gapped seqs: positions are free in the stable layout.
    const std::string id = "p1:" + std::to_string(b + 5);
    std::string doc = R"({"id":")" + id + R"(","postId":"p1","seq":)" + std::to_string(b * 10) +
                      R"(,"comments":[)";
    for (size_t i = 0; i < sizes[b]; ++i) doc += (i ? "," : "") + items[at++];
    pages[id] = doc + "]}";
  }
  return DocumentSetJson(expected);
}

TEST(TestCli, StableBucketsAreComparedByContentAndInvariantsNotPlaces) {
  const std::string relaid = WriteTempFile("relaid.json", RelaidPostComments({60, 100, 88}));
  Result r = Denormd({"test", "-c", kConfig, kEvents, "--expect", relaid});
  EXPECT_EQ(0, r.code) << r.out << r.err;
  // A layout that breaks the fill invariant is not the same result.
  const std::string broken = WriteTempFile("broken.json", RelaidPostComments({30, 100, 100, 18}));
  r = Denormd({"test", "-c", kConfig, kEvents, "--expect", broken});
  EXPECT_EQ(1, r.code) << r.out << r.err;
  EXPECT_TRUE(Has(r.out, "post_comments/p1:5: 30 items, fewer than 50 though not its group's last "
                         "(by seq) (expected)\n"))
      << r.out;
}

TEST(TestCli, UpdateWritesTheFileOnlyWhenTheResultChanged) {
  const std::string file = WriteTempFile("update.json", "");
  std::remove(file.c_str());
  Result r = Denormd({"test", "-c", kConfig, kEvents, "--expect", file});
  EXPECT_EQ(2, r.code) << r.out << r.err;  // not there yet
  EXPECT_TRUE(Has(r.err, "cannot read " + file)) << r.err;

  r = Denormd({"test", "-c", kConfig, kEvents, "--expect", file, "--update"});
  EXPECT_EQ(0, r.code) << r.out << r.err;
  EXPECT_TRUE(Has(r.out, file + ": written\n")) << r.out;
  EXPECT_EQ(ReadFile(kExpected) + "\n", ReadFile(file));
  r = Denormd({"test", "-c", kConfig, kEvents, "--expect", file});
  EXPECT_EQ(0, r.code) << r.out << r.err;

  // The same documents spelled otherwise (compact, keys in another order):
  // up to date, left as it is.
  DocumentSet same = ArticleExpected();
  std::string compact = "{\"stale\": 2, \"dead\": 7, \"collections\": {";
  bool first_collection = true;
  for (const auto& collection : same.collections) {
    compact += std::string(first_collection ? "" : ",") + "\"" + collection.first + "\": {";
    first_collection = false;
    bool first = true;
    for (const auto& doc : collection.second) {
      compact += std::string(first ? "" : ",") + "\"" + doc.first + "\": " + doc.second;
      first = false;
    }
    compact += "}";
  }
  compact += "}}";
  testing::WriteTempFile("update.json", compact);
  r = Denormd({"test", "-c", kConfig, kEvents, "--expect", file, "--update"});
  EXPECT_EQ(0, r.code) << r.out << r.err;
  EXPECT_TRUE(Has(r.out, file + ": up to date\n")) << r.out;
  EXPECT_EQ(compact, ReadFile(file));

  // A changed result: the differences are listed and the file rewritten.
  same.collections["books"].erase("b3");
  testing::WriteTempFile("update.json", DocumentSetJson(same));
  r = Denormd({"test", "-c", kConfig, kEvents, "--expect", file, "--update"});
  EXPECT_EQ(0, r.code) << r.out << r.err;
  EXPECT_TRUE(Has(r.out, "books/b3: unexpected {")) << r.out;
  EXPECT_TRUE(Has(r.out, file + ": updated (1 difference)\n")) << r.out;
  EXPECT_EQ(ReadFile(kExpected) + "\n", ReadFile(file));

  // Something that is not an expected-documents file is never overwritten.
  const std::string yaml = WriteTempFile("config-copy.yaml", ReadFile(kConfig));
  r = Denormd({"test", "-c", kConfig, kEvents, "--expect", yaml, "--update"});
  EXPECT_EQ(2, r.code) << r.out << r.err;
  EXPECT_TRUE(Has(r.err, "not overwritten")) << r.err;
  EXPECT_EQ(ReadFile(kConfig), ReadFile(yaml));
}

TEST(TestCli, ReadsALogFromStdin) {
  const Result r = Denormd({"test", "-c", kConfig, "-", "--expect", kExpected}, kEvents);
  EXPECT_EQ(0, r.code) << r.out << r.err;
  EXPECT_TRUE(Has(r.out, "stdin:282: dead letter: field \"id\" must not be empty\n")) << r.out;
}

TEST(TestCli, UsageAndConfigErrorsExitTwo) {
  const std::string bad_config = WriteTempFile("bad.yaml", "store: {schema: x}\nentities: [a]\n"
                                                           "projections: {p: {from: b}}\n");
  const std::string not_json = WriteTempFile("not.json", "{");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"test", "-c", kConfig}, "name at least one event log"},
      {{"test", "-c", kConfig, kEvents, "--update"}, "--update writes the --expect FILE"},
      {{"test", "-c", kConfig, kEvents, "--batch", "1,0"}, "--batch needs whole numbers >= 1"},
      {{"test", "-c", kConfig, kEvents, "--batch", "7,"}, "--batch needs whole numbers >= 1"},
      {{"test", "-c", kConfig, kEvents, "--batch", "1", "--batch-size", "3"}, "not both"},
      {{"test", "-c", kConfig, "-", "--batch", "1,2"}, "stdin can be read once"},
      {{"test", "-c", kConfig, "/nonexistent/events.jsonl"}, "cannot open event log"},
      {{"test", "-c", kConfig, kEvents, "--expect", not_json}, "not valid JSON"},
      {{"test", "-c", bad_config, kEvents}, "unknown entity type \"b\""},
      {{"replay", "-c", kConfig, kEvents, "--dump"}, "options of `denormd test`"},
  };
  for (const auto& c : cases) {
    const Result r = Denormd(c.first);
    std::string args;
    for (const std::string& arg : c.first) args += " " + arg;
    EXPECT_EQ(2, r.code) << args << "\n" << r.out << r.err;
    EXPECT_TRUE(Has(r.err, c.second)) << args << "\n" << r.err;
  }
}

// A fake engine whose result at batch size 7 has one more book.
Status FakeRun(const Config& config, size_t batch_size, MemoryRun* out) {
  out->documents = EmptyDocumentSet(config);
  out->documents.collections["books"]["b1"] = R"({"id":"b1"})";
  if (batch_size == 7) out->documents.collections["books"]["b2"] = R"({"id":"b2"})";
  out->documents.dead = 0;
  out->documents.stale = 0;
  return Status::Ok();
}

TEST(TestCommand, FailsWhenTwoBatchSizesGiveDifferentResults) {
  // The engine's results never depend on the batch size (the suite proves
  // it); a fake one that does shows what a user would see.
  std::vector<ConfigError> errors;
  std::optional<Config> config = LoadConfig(kConfig, &errors);
  ASSERT_TRUE(config.has_value());
  TestCommandOptions options;
  options.logs = {kEvents};
  options.batch_sizes = {1, 7, 5000};
  options.run_in_memory = [](const Config& c, const std::vector<std::string>&, size_t batch,
                             MemoryRun* out) { return FakeRun(c, batch, out); };
  std::ostringstream out, err;
  EXPECT_EQ(1, RunTestCommand(*config, options, out, err));
  EXPECT_TRUE(Has(out.str(), "batch size 7 gives another result than batch size 1 (left: 7, "
                             "right: 1):\n  books/b2: unexpected {\"id\":\"b2\"}\n"))
      << out.str();
  EXPECT_FALSE(Has(out.str(), "batch size 5000 gives")) << out.str();
  // --update does not write a result the batch sizes disagree on.
  const std::string file = WriteTempFile("never.json", "");
  std::remove(file.c_str());
  options.expect = file;
  options.update = true;
  EXPECT_EQ(1, RunTestCommand(*config, options, out, err));
  EXPECT_TRUE(Has(out.str(), file + ": not updated: the batch sizes disagree")) << out.str();
  struct stat info;
  EXPECT_NE(0, stat(file.c_str(), &info));
}

TEST(TestCli, TheManPageCoversEveryOptionOfHelp) {
  // As tests/containers/package_test.sh checks, but in every run of the suite.
  const Result help = Denormd({"--help"});
  EXPECT_EQ(0, help.code);
  EXPECT_TRUE(Has(help.out, "  test FILE...")) << help.out;
  const std::string man = ReadFile(SourcePath("docs/denormd.1"));
  size_t at = 0;
  int options = 0;
  while ((at = help.out.find("--", at)) != std::string::npos) {
    size_t end = at + 2;
    while (end < help.out.size() && (std::islower(static_cast<unsigned char>(help.out[end])) || help.out[end] == '-')) ++end;
    std::string option = help.out.substr(at, end - at);
    at = end;
    if (option.size() < 3) continue;
    std::string escaped;
    for (char c : option) escaped += c == '-' ? std::string("\\-") : std::string(1, c);
    EXPECT_TRUE(Has(man, escaped)) << "docs/denormd.1 does not mention " << option;
    ++options;
  }
  EXPECT_GT(options, 10);
  EXPECT_TRUE(Has(man, ".BI test \" FILE...\"")) << "docs/denormd.1 does not describe `test`";
}

}  // namespace
}  // namespace denormd
