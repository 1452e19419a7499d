// Fan-out goes through the reference index, not a scan: renaming an author
// with 100,000 books rewrites exactly those books and the author's own
// document, and nothing else.
#include <gtest/gtest.h>

#include <fstream>

#include "connectors/postgres_store.h"
#include "daemon/replay.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

TEST(FanOut, RenamingAnAuthorRewritesExactlyItsBooks) {
  constexpr int kBooksOfHotAuthor = 100000;
  constexpr int kOtherBooks = 500;
  testing::ArticleOnPostgres article;
  const Config& config = article.config;
  const BatchApplier& applier = article.applier;
  Store& store = article.store;

  std::string load_text;
  load_text += R"({"type":"author","id":"hot","op":"upsert","version":1,"data":{"firstName":"Hot","lastName":"Author"}})" "\n";
  load_text += R"({"type":"author","id":"cold","op":"upsert","version":1,"data":{"firstName":"Cold","lastName":"Author"}})" "\n";
  for (int i = 0; i < kBooksOfHotAuthor; ++i) {
    load_text += R"({"type":"book","id":"h)" + std::to_string(i) +
                 R"(","op":"upsert","version":1,"data":{"name":"Book","authorIds":["hot"]}})" "\n";
  }
  for (int i = 0; i < kOtherBooks; ++i) {
    load_text += R"({"type":"book","id":"c)" + std::to_string(i) +
                 R"(","op":"upsert","version":1,"data":{"name":"Book","authorIds":["cold"]}})" "\n";
  }
  std::string load = testing::WriteTempFile("load.jsonl", load_text);
  ReplayReport loaded;
  ReplayOptions options;
  ASSERT_TRUE(ReplayLog(article.decoder, applier, &store, load, options, &loaded).ok());

  std::string rename = testing::WriteTempFile(
      "rename.jsonl",
      R"({"type":"author","id":"hot","op":"patch","version":2,"data":{"lastName":"Renamed"}})" "\n");
  ReplayReport renamed;
  Status status = ReplayLog(article.decoder, applier, &store, rename, options, &renamed);
  ASSERT_TRUE(status.ok()) << status.ToString();
  // The author's own document plus every one of its books; not the cold
  // author's books, not the catalog.
  EXPECT_EQ(1u + kBooksOfHotAuthor, renamed.stats.units_recomputed);
  EXPECT_EQ(1u + kBooksOfHotAuthor, renamed.stats.documents_written);
  EXPECT_EQ(0u, renamed.stats.documents_deleted);
  const std::string& s = config.store.schema;
  EXPECT_EQ(std::vector<std::string>({std::to_string(kBooksOfHotAuthor)}),
            testing::Sql("select count(*) from " + s +
                         ".books where doc->'authors'->0->>'name' = 'Hot Renamed'"));

  // A change no document copies (a field outside every select) rewrites only
  // the author's own document.
  std::string unrelated = testing::WriteTempFile(
      "unrelated.jsonl",
      R"({"type":"author","id":"hot","op":"patch","version":3,"data":{"bio":"new"}})" "\n");
  ReplayReport quiet;
  ASSERT_TRUE(ReplayLog(article.decoder, applier, &store, unrelated, options, &quiet).ok());
  EXPECT_EQ(1u, quiet.stats.units_recomputed);
  EXPECT_EQ(1u, quiet.stats.documents_written);
}

}  // namespace
}  // namespace denormd
