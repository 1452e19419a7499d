// A collection several projections write (the article's catalog of books and
// reviews) is keyed on (partition key, id): a review and a book may share an
// id in different partitions; two documents with one key are refused, the
// event responsible becoming a dead letter that names the other document.
// The same on PostgreSQL and in memory.
#include <gtest/gtest.h>

#include "daemon/replay.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

constexpr const char* kEvents[] = {
    R"({"type":"book","id":"shared1","op":"upsert","data":{"name":"A book"}})",
    R"({"type":"review","id":"shared1","op":"upsert","data":{"bookId":"b1","stars":5}})",
    R"({"type":"book","id":"b9","op":"upsert","data":{"name":"Another"}})",
    // key (b9, b9) is the book's: refused
    R"({"type":"review","id":"b9","op":"upsert","data":{"bookId":"b9","stars":1}})",
    R"({"type":"review","id":"r2","op":"upsert","data":{"bookId":"b9","stars":3}})",
};

TEST(SharedCollection, KeyedOnPartitionKeyAndIdOnPostgresAndInMemory) {
  testing::ArticleOnPostgres article;
  std::string text;
  for (const char* event : kEvents) text += std::string(event) + "\n";
  ReplayReport report;
  Status status = ReplayLog(article.decoder, article.applier, &article.store,
                            testing::WriteTempFile("events.jsonl", text), ReplayOptions(), &report);
  ASSERT_TRUE(status.ok()) << status.ToString();
  const std::string& schema = article.config.store.schema;
  EXPECT_EQ(std::vector<std::string>({"b1\tshared1\treview", "b9\tb9\tbook", "b9\tr2\treview",
                                      "shared1\tshared1\tbook"}),
            testing::Sql("select pk, id, doc->>'type' from " + schema + ".catalog order by pk, id"));
  std::vector<std::string> letters =
      testing::Sql("select position, reason from " + schema + ".dead_letters");
  ASSERT_EQ(1u, letters.size());
  EXPECT_EQ(0u, letters[0].find("4\t")) << letters[0];
  EXPECT_NE(std::string::npos, letters[0].find("has the key of document b9 (partition b9) of "
                                               "projection catalog_books"))
      << letters[0];

  testing::InMemory memory(testing::ReadFile(testing::SourcePath("tests/data/article/config.yaml")));
  ReplayReport in_memory_report;
  ASSERT_TRUE(ReplayLog(memory.decoder(), memory.applier(), &memory.store(),
                        testing::WriteTempFile("events.jsonl", text), ReplayOptions(),
                        &in_memory_report)
                  .ok());
  EXPECT_EQ(1u, in_memory_report.stats.dead_letters);
  std::vector<std::string> in_memory;
  for (const auto& doc : memory.Documents("catalog")) {
    JsonDocument json;
    ASSERT_TRUE(ParseJson(doc.second.json, &json).ok());
    in_memory.push_back(doc.second.pk.value_or("") + "\t" + doc.second.id + "\t" +
                        json["type"].GetString());
  }
  std::sort(in_memory.begin(), in_memory.end());
  EXPECT_EQ(testing::Sql("select pk, id, doc->>'type' from " + schema + ".catalog order by pk, id"),
            in_memory);
  EXPECT_EQ(std::vector<std::string>(), memory.Differences());
}

}  // namespace
}  // namespace denormd
