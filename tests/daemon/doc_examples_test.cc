// The documentation cannot drift from the code: every ```yaml block of
// README.md and docs/configuration.md is a config or a piece of one, and is
// checked with the denormd binary.
//
//   * A complete config (top-level `store` and `projections`) must pass
//     `denormd check`. When a ```jsonl block (events) follows it before the
//     next ```yaml block, `denormd test` must apply it without error; when a
//     ```json block holding {"collections": ...} follows too, the events must
//     make exactly those documents, at batch sizes 1, 2 and 5000.
//   * A fragment is checked inside a skeleton config (a store, the article's
//     entity types, and whatever the fragment lacks): top-level sections as
//     they are; `fields:` as an entity projection's; `select:` as an embed's;
//     a map of `from`/`buckets` definitions as projections; anything else as
//     field entries. A `feed` fragment gets a Kafka source and a projection
//     per collection it names.
#include <algorithm>
#include <iterator>
#include <sstream>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "projections/document_set.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::RunDenormdOffline;
using testing::WriteTempFile;

struct Block {
  std::string file;   // relative to the source tree
  int line = 0;       // of the opening fence
  std::string lang;   // after the fence: yaml, json, jsonl, sh, ...
  std::string text;   // without the fence's indentation

  std::string where() const { return file + ":" + std::to_string(line); }
};

// The fenced code blocks of Markdown `text` (from `file`), in order.
std::vector<Block> FencedBlocks(const std::string& file, const std::string& text) {
  std::istringstream in(text);
  std::vector<Block> blocks;
  std::string line;
  int number = 0;
  bool open = false;
  size_t indent = 0;
  while (std::getline(in, line)) {
    ++number;
    const size_t fence = line.find("```");
    const bool is_fence =
        fence != std::string::npos && line.find_first_not_of(' ') == fence;
    if (!open && is_fence) {
      open = true;
      indent = fence;
      blocks.push_back({file, number, line.substr(fence + 3), ""});
    } else if (open && is_fence && line.substr(fence) == "```") {
      open = false;
    } else if (open) {
      blocks.back().text += (line.size() >= indent ? line.substr(indent) : "") + "\n";
    }
  }
  EXPECT_FALSE(open) << file << ": a fence is not closed";
  return blocks;
}

std::string Indented(const std::string& text, size_t by) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) out += (line.empty() ? "" : std::string(by, ' ') + line) + "\n";
  return out;
}

const char* const kTopKeys[] = {"source", "store", "batch", "retention", "limits", "log",
                                "feed",   "entities", "projections"};

// A fragment inside a skeleton config (see the file comment).
std::string CompleteFragment(const YAML::Node& yaml, const std::string& text) {
  std::string body;
  bool top_level = true;
  for (auto it = yaml.begin(); it != yaml.end(); ++it) {
    const std::string key = it->first.as<std::string>();
    top_level = top_level && std::find(std::begin(kTopKeys), std::end(kTopKeys), key) !=
                                 std::end(kTopKeys);
  }
  const std::string first = yaml.begin()->first.as<std::string>();
  bool definitions = true;
  for (auto it = yaml.begin(); it != yaml.end(); ++it) {
    definitions = definitions && it->second.IsMap() && (it->second["from"] || it->second["buckets"]);
  }
  if (top_level) {
    body = text;
  } else if (yaml.size() == 1 && first == "fields") {
    body = "projections:\n  example:\n    from: author\n" + Indented(text, 4);
  } else if (yaml.size() == 1 && first == "select") {
    body = "projections:\n  example:\n    from: post\n    fields:\n      example:\n"
           "        embed: comment\n        via: postId\n" + Indented(text, 8);
  } else if (definitions) {
    body = "projections:\n" + Indented(text, 2);
  } else {
    body = "projections:\n  example:\n    from: author\n    fields:\n" + Indented(text, 6);
  }
  if (!yaml["store"]) body += "store: {schema: docs}\n";
  if (!yaml["entities"]) {
    body += "entities: [person, address, contactDetail, stock, publisher, author, book, review, "
            "post, comment]\n";
  }
  // A feed fragment publishes to Kafka: the skeleton's source gives the
  // brokers, and a projection for each collection the fragment names.
  if (yaml["feed"] && !yaml["source"]) {
    body += "source: {kafka: {brokers: \"localhost:9092\", topics: [events], group: docs}}\n";
  }
  if (body.find("projections:") == std::string::npos) {
    body += "projections:\n  example: {from: author}\n";
    if (yaml["feed"] && yaml["feed"]["collections"] && yaml["feed"]["collections"].IsMap()) {
      for (const auto& entry : yaml["feed"]["collections"]) {
        body += "  " + entry.first.as<std::string>() + ": {from: author}\n";
      }
    }
  }
  return body;
}

struct Counts {
  int complete = 0;
  int tested = 0;     // with events
  int expected = 0;   // with events and documents
  int fragments = 0;
};

// Checks the examples of Markdown `text` (from `file`); a failure names the
// block's line.
Counts CheckExamples(const std::string& file, const std::string& text) {
  const std::vector<Block> blocks = FencedBlocks(file, text);
  Counts counts;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Block& block = blocks[i];
    if (block.lang != "yaml") continue;
    SCOPED_TRACE(block.where() + ":\n" + block.text);
    YAML::Node yaml;
    try {
      yaml = YAML::Load(block.text);
    } catch (const YAML::Exception& e) {
      ADD_FAILURE() << "not YAML: " << e.what();
      continue;
    }
    if (!yaml.IsMap() || yaml.size() == 0) {
      ADD_FAILURE() << "a ```yaml block must be a config or a piece of one (a map)";
      continue;
    }
    const bool complete = yaml["store"] && yaml["projections"];
    const std::string config =
        WriteTempFile("config.yaml", complete ? block.text : CompleteFragment(yaml, block.text));
    testing::CommandResult r = RunDenormdOffline({"check", "-c", config});
    EXPECT_EQ(0, r.code) << "denormd check:\n" << r.out << r.err << "on\n" << testing::ReadFile(config);
    if (!complete) {
      counts.fragments++;
      continue;
    }
    counts.complete++;
    // Events and documents shown after it, before the next config.
    const Block* events = nullptr;
    const Block* documents = nullptr;
    for (size_t j = i + 1; j < blocks.size() && blocks[j].lang != "yaml"; ++j) {
      DocumentSet parsed;
      if (blocks[j].lang == "jsonl" && events == nullptr) events = &blocks[j];
      if (blocks[j].lang == "json" && documents == nullptr &&
          ParseDocumentSet(blocks[j].text, &parsed).ok()) {
        documents = &blocks[j];
      }
    }
    if (events == nullptr) continue;
    counts.tested++;
    std::vector<std::string> args = {"test", "-c", config,
                                     WriteTempFile("events.jsonl", events->text)};
    if (documents != nullptr) {
      counts.expected++;
      for (const std::string& more :
           {std::string("--expect"), WriteTempFile("expected.json", documents->text),
            std::string("--batch"), std::string("1,2,5000")}) {
        args.push_back(more);
      }
    }
    r = RunDenormdOffline(args);
    EXPECT_EQ(0, r.code) << "denormd test with the events of " << events->where()
                         << (documents ? " and the documents of " + documents->where() : "")
                         << ":\n" << r.out << r.err;
  }
  return counts;
}

Counts CheckDocument(const std::string& file) {
  return CheckExamples(file, testing::ReadFile(testing::SourcePath(file)));
}

TEST(DocExamples, EveryConfigInTheReadmeIsValid) {
  const Counts counts = CheckDocument("README.md");
  EXPECT_GE(counts.complete, 1);
}

TEST(DocExamples, EveryConfigInTheConfigurationGuideIsValidAndMakesTheDocumentsShown) {
  const Counts counts = CheckDocument("docs/configuration.md");
  EXPECT_GE(counts.complete, 1);
  EXPECT_GE(counts.expected, 1);  // the worked example of `denormd test`
  EXPECT_GE(counts.fragments, 15);
}

TEST(DocExamples, TheCheckerFindsWrongExamples) {
  // Documents that do not make what the example shows, and a fragment that
  // names an unknown type: each is a failure naming what is wrong.
  const std::string doc =
      "```yaml\nstore: {schema: s}\nentities: [a]\nprojections: {as: {from: a}}\n```\n\n"
      "```jsonl\n{\"type\": \"a\", \"id\": \"1\", \"op\": \"upsert\", \"data\": {\"x\": 1}}\n```\n\n"
      "```json\n{\"collections\": {\"as\": {\"1\": {\"id\": \"1\", \"x\": 2}}}}\n```\n\n"
      "  ```yaml\n  fields: {n: {count: dragon, via: x}}\n  ```\n";
  ::testing::TestPartResultArray failures;
  Counts counts;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    counts = CheckExamples("doc.md", doc);
  }
  EXPECT_EQ(1, counts.complete);
  EXPECT_EQ(1, counts.expected);
  EXPECT_EQ(1, counts.fragments);
  std::string all;
  for (int i = 0; i < failures.size(); ++i) all += failures.GetTestPartResult(i).message();
  EXPECT_EQ(2, failures.size()) << all;
  EXPECT_NE(std::string::npos, all.find("as/1: .x: 1 != 2")) << all;
  EXPECT_NE(std::string::npos, all.find("events of doc.md:7")) << all;
  EXPECT_NE(std::string::npos, all.find("unknown entity type \"dragon\"")) << all;
  EXPECT_NE(std::string::npos, all.find("doc.md:15")) << all;
}

}  // namespace
}  // namespace denormd
