// verify checks the reference index against the stored source: a missing or
// unexpected index row, and a per-target count that disagrees with its rows,
// are each reported (the split a duplicate key once caused stayed invisible);
// rebuild repairs them.
#include <gtest/gtest.h>

#include "daemon/replay.h"
#include "projections/maintenance.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

TEST(VerifyIndex, FindsRowsAndCountsThatDisagreeWithTheSource) {
  testing::ArticleOnPostgres article;
  ReplayReport report;
  ASSERT_TRUE(ReplayLog(article.decoder, article.applier, &article.store,
                        testing::SourcePath("tests/data/article/events.jsonl"), ReplayOptions(),
                        &report)
                  .ok());
  auto differences = [&] {
    std::vector<std::string> out;
    EXPECT_TRUE(Verify(article.plan, &article.store, MaintenanceOptions(), &out).ok());
    std::string all;
    for (const std::string& line : out) all += line + "\n";
    return all;
  };
  ASSERT_EQ("", differences());
  const std::string& s = article.config.store.schema;
  testing::Sql("delete from " + s + ".refs where type = 'book' and id = 'b1' and target = 'a2'");
  testing::Sql("insert into " + s + ".refs (type, field, target, sort, id)"
               " values ('book', 'authorIds', 'a9', '', 'b2')");
  testing::Sql("update " + s + ".ref_counts set count = count + 5 where type = 'comment'"
               " and target = 'p1'");
  const std::string found = differences();
  EXPECT_NE(std::string::npos,
            found.find("reference index: book b1 under a2 [authorIds]: missing row"))
      << found;
  EXPECT_NE(std::string::npos,
            found.find("reference index: book b2 under a9 [authorIds]: unexpected row"))
      << found;
  // The counter's 5 too many, against the comments of p1 counted in plain SQL.
  const uint64_t comments = testing::SqlCount("select count(*) from " + s +
                                              ".entities where type = 'comment' and not deleted"
                                              " and data->>'postId' = 'p1'");
  EXPECT_NE(std::string::npos, found.find("[postId order -createdAt] -> p1: " +
                                          std::to_string(comments + 5) + ", the source says " +
                                          std::to_string(comments)))
      << found;
  EXPECT_NE(std::string::npos, found.find("book [authorIds] -> a2: 2, the index rows are 1"))
      << found;
  BatchStats stats;
  uint64_t reindexed = 0;
  ASSERT_TRUE(Reindex(article.plan, &article.store, MaintenanceOptions(), &reindexed).ok());
  ASSERT_TRUE(Rebuild(article.plan, &article.store, MaintenanceOptions(), &stats).ok());
  EXPECT_EQ("", differences());
}

}  // namespace
}  // namespace denormd
