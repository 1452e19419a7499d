// The hostile-input corpus (tests/data/hostile/corpus.jsonl, plus cases too
// large to keep in the repository, generated here) replayed with the CLI on
// PostgreSQL: the process exits 0, every bad event is a dead letter with its
// reason (a value only the store refuses included: the batch is split until
// that event is alone), every good event is applied, `verify` is clean, and a
// 50 MB line is never held in memory.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::Sql;

struct Case {
  std::string line;
  std::string reason;  // "" when the event must apply
};

std::vector<Case> StaticCases() {
  std::vector<Case> cases;
  std::istringstream corpus(testing::ReadFile(testing::SourcePath("tests/data/hostile/corpus.jsonl")));
  std::istringstream reasons(
      testing::ReadFile(testing::SourcePath("tests/data/hostile/expected-reasons.tsv")));
  std::string line, expected;
  std::getline(reasons, expected);  // header
  while (std::getline(corpus, line) && std::getline(reasons, expected)) {
    cases.push_back({line, expected.substr(expected.find('\t') + 1)});
  }
  return cases;
}

// `n` characters that do not compress (PostgreSQL compresses long index keys).
std::string Incompressible(size_t n) {
  std::string out;
  uint64_t x = 88172645463325252ull;
  while (out.size() < n) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out += "abcdefghijklmnopqrstuvwxyz0123456789"[x % 36];
  }
  return out;
}

std::vector<Case> GeneratedCases() {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string many_authors;
  for (int i = 0; i < 20000; ++i) many_authors += (i ? ",\"x" : "\"x") + std::to_string(i) + "\"";
  return {
      {R"({"type":"author","id":"d1","op":"upsert","data":{"deep":)" + deep + "}}",
       "nests deeper than 512"},
      {R"({"type":"author","id":")" + std::string(3000, 'i') + R"(","op":"upsert","data":{}})",
       "is 3000 bytes long; an id is at most 512"},
      {R"({"type":"book","id":"k2","op":"upsert","data":{"authorIds":[")" + std::string(3000, 'r') +
           R"("]}})",
       "a referenced id is at most 512"},
      {R"({"type":"comment","id":"m1","op":"upsert","data":{"postId":"p1","createdAt":")" +
           std::string(3000, 'z') + R"("}})",
       "an ordered value is at most 1024"},
      {R"({"type":"author","id":"d2","op":"upsert","data":{"bio":")" + std::string(10 << 20, 'b') +
           R"("}})",
       "more than batch.max_event_bytes"},
      {R"({"type":"author","id":"d3","op":"upsert","data":{"bio":")" + std::string(50 << 20, 'c') +
           R"("}})",
       "more than batch.max_event_bytes"},
      // Only the store can refuse this one (a partition key too large to
      // index): the batch is split until it is alone.
      {R"({"type":"review","id":"v1","op":"upsert","data":{"bookId":")" + Incompressible(3000) +
           R"("}})",
       "the store refused it"},
      {R"({"type":"book","id":"k3","op":"upsert","version":1,"data":{"authorIds":[)" +
           many_authors + "]}}",
       ""},
      {R"({"type":"comment","id":"m2","op":"upsert","version":1,"data":{"postId":"p1","createdAt":1}})",
       ""},
  };
}

TEST(HostileInput, EveryBadEventIsADeadLetterAndEveryGoodOneApplies) {
  Config config;
  const std::string config_file = testing::ArticleConfigFile(&config);
  const std::string& schema = config.store.schema;
  std::vector<Case> cases = StaticCases();
  ASSERT_EQ(29u, cases.size());
  for (Case& generated : GeneratedCases()) cases.push_back(std::move(generated));
  std::string text;
  uint64_t bad = 0, good = 0;
  for (const Case& c : cases) {
    text += c.line + "\n";
    if (c.reason == "skip") continue;
    (c.reason.empty() ? good : bad)++;
  }
  const std::string log = testing::WriteTempFile("hostile.jsonl", text);
  text.clear();
  text.shrink_to_fit();
  std::string output;
  ASSERT_EQ(0, testing::RunDenormd({"replay", "-c", config_file, log}, &output)) << output;
  // Every bad event is a dead letter at its line, with its reason.
  std::vector<std::string> letters =
      Sql("select position, reason from " + schema + ".dead_letters order by position");
  ASSERT_EQ(bad, letters.size()) << output;
  size_t next = 0;
  for (size_t line = 1; line <= cases.size(); ++line) {
    const Case& c = cases[line - 1];
    if (c.reason.empty() || c.reason == "skip") continue;
    ASSERT_LT(next, letters.size());
    const std::string& letter = letters[next++];
    EXPECT_EQ(std::to_string(line), letter.substr(0, letter.find('\t'))) << letter;
    EXPECT_NE(std::string::npos, letter.find(c.reason)) << "line " << line << ": " << letter;
  }
  // Every good event applied; nothing counted stale.
  EXPECT_EQ(std::vector<std::string>({std::to_string(good) + "\t0\t" + std::to_string(bad)}),
            Sql("select applied, stale, dead from " + schema + ".positions"));
  EXPECT_EQ(std::vector<std::string>({"Crlf"}),
            Sql("select doc->>'firstName' from " + schema + ".authors where id = 'b5'"));
  EXPECT_EQ(std::vector<std::string>({"20000"}),
            Sql("select jsonb_array_length(data->'authorIds') from " + schema +
                ".entities where id = 'k3'"));
  EXPECT_NE(std::string::npos, output.find("event=batch_split")) << output;
  // The 50 MB line was never held whole.
  const size_t rss = output.find("peak RSS ");
  ASSERT_NE(std::string::npos, rss) << output;
#if !defined(__SANITIZE_ADDRESS__)  // ASan's shadow memory and quarantine count too
  EXPECT_LT(std::stoi(output.substr(rss + 9)), 150) << output;
#endif
  ASSERT_EQ(0, testing::RunDenormd({"verify", "-c", config_file}, &output)) << output;
}

}  // namespace
}  // namespace denormd
