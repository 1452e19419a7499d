// The stable bucket layout on PostgreSQL: the probe, numbering and
// re-spacing statements, the bucket columns readers page by, and `verify`
// reading them; a random stream of out-of-order inserts, deletes and moves
// stays exact and equal to the in-memory engine's, batch after batch.
#include <algorithm>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "projections/buckets/bucket_tables.h"
#include "projections/maintenance.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

constexpr const char* kConfig = R"(store: {schema: unused}
entities: [comment]
projections:
  pages: {buckets: comment, by: postId, size: 4, order_by: at, select: [id, text]}
)";

std::string Comment(const std::string& id, const std::string& post, double at,
                    const std::string& text = "t") {
  return R"({"type":"comment","id":")" + id + R"(","op":"upsert","data":{"postId":")" + post +
         R"(","at":)" + std::to_string(at) + R"(,"text":")" + text + R"("}})";
}

class StableBucketsOnPostgres : public ::testing::Test {
 protected:
  StableBucketsOnPostgres() : engine_(testing::ConfigOnTestDatabase(kConfig), testing::TestPostgresUrl()) {
    Status status = engine_.store.Open();
    EXPECT_TRUE(status.ok()) << status.ToString();
  }

  BatchStats Apply(const std::vector<std::string>& events) {
    std::vector<RawRecord> records;
    for (const std::string& json : events) {
      records.push_back(testing::LogRecord({"pg", 0, ++position_}, json));
    }
    BatchStats stats;
    Status status = engine_.applier.Apply(&engine_.store, DecodeBatch(engine_.decoder, records), &stats);
    EXPECT_TRUE(status.ok()) << status.ToString();
    memory_.Apply(events);
    return stats;
  }

  std::vector<std::string> Differences() {
    std::vector<std::string> differences;
    EXPECT_TRUE(Verify(engine_.plan, &engine_.store, MaintenanceOptions(), &differences).ok());
    return differences;
  }

  // The items of group `post` in seq order, as PostgreSQL pages them.
  std::vector<std::string> PagedItems(const std::string& post) {
    return testing::Sql("select i->>'id' from " + engine_.config.store.schema +
                        ".pages p, jsonb_array_elements(p.doc->'items') with ordinality e(i, n)"
                        " where p.pk = '" + post + "' order by p.seq, e.n");
  }

  // The same from the in-memory engine.
  std::vector<std::string> MemoryItems(const std::string& post) {
    std::vector<std::pair<int64_t, std::string>> pages;
    for (const auto& doc : memory_.Documents("pages")) {
      if (doc.second.pk == post) pages.push_back({doc.second.bucket->seq, doc.second.json});
    }
    std::sort(pages.begin(), pages.end());
    std::vector<std::string> ids;
    for (const auto& page : pages) {
      JsonDocument json;
      EXPECT_TRUE(ParseJson(page.second, &json).ok());
      for (const JsonValue& item : json["items"].GetArray()) ids.push_back(item["id"].GetString());
    }
    return ids;
  }

  Engine engine_;
  testing::InMemory memory_{kConfig};
  int64_t position_ = 0;
};

TEST_F(StableBucketsOnPostgres, RandomStreamStaysExactAndEqualsTheInMemoryEngine) {
  std::vector<std::string> load;
  for (int i = 1; i <= 200; ++i) load.push_back(Comment("c" + std::to_string(i), "p", i));
  Apply(load);
  std::mt19937 random(7);
  std::map<std::string, std::pair<std::string, double>> live;
  for (int i = 1; i <= 200; ++i) live["c" + std::to_string(i)] = {"p", static_cast<double>(i)};
  int next = 1000;
  BatchStats total;
  for (int batch = 0; batch < 30; ++batch) {
    std::vector<std::string> events;
    for (int e = 0; e < 10; ++e) {
      auto it = std::next(live.begin(), random() % live.size());
      switch (random() % 4) {
        case 0: {  // out of order
          const std::string id = "n" + std::to_string(++next);
          live[id] = {random() % 3 ? "p" : "q", (random() % 4000) / 20.0};
          events.push_back(Comment(id, live[id].first, live[id].second));
          break;
        }
        case 1:
          events.push_back(R"({"type":"comment","id":")" + it->first + R"(","op":"delete"})");
          live.erase(it);
          break;
        case 2:
          it->second = {random() % 2 ? "p" : "q", (random() % 4000) / 20.0};
          events.push_back(Comment(it->first, it->second.first, it->second.second));
          break;
        default:
          events.push_back(Comment(it->first, it->second.first, it->second.second,
                                   "e" + std::to_string(batch)));
      }
    }
    total.Add(Apply(events));
    ASSERT_EQ(std::vector<std::string>(), Differences()) << "after batch " << batch;
  }
  EXPECT_EQ(0u, total.tails_rendered);
  for (const std::string post : {"p", "q"}) EXPECT_EQ(MemoryItems(post), PagedItems(post)) << post;
}

TEST_F(StableBucketsOnPostgres, SplitsRespaceOneSideAndReadersPageBySeq) {
  std::vector<std::string> load;
  for (int i = 1; i <= 40; ++i) load.push_back(Comment("c" + std::to_string(i), "p", i));
  Apply(load);  // p:0 .. p:9, seq 0 .. 9
  const std::string table = engine_.config.store.schema + ".pages";
  // Splits p:2: no room between seq 2 and 3. The 3 buckets before the gap
  // (against 7 after it) move to end at 3 - 2^20, below 0.
  Apply({Comment("x", "p", 10.5)});
  EXPECT_EQ(std::vector<std::string>({"p:0\t-3145725", "p:1\t-2097149", "p:2\t-1048573",
                                      "p:10\t-524285", "p:3\t3", "p:4\t4"}),
            testing::Sql("select id, seq from " + table + " order by seq limit 6"));
  // Near the end the buckets after the gap move: p:9 alone.
  Apply({Comment("y", "p", 34.5)});  // splits p:8 (seq 8)
  EXPECT_EQ(std::vector<std::string>({"p:8\t8", "p:11\t524296", "p:9\t1048584"}),
            testing::Sql("select id, seq from " + table + " where seq >= 8 order by seq"));
  // The document's seq is the column's; "the page after seq s" is one row.
  EXPECT_EQ(std::vector<std::string>(),
            testing::Sql("select id from " + table + " where (doc->>'seq')::bigint <> seq"));
  EXPECT_EQ(std::vector<std::string>({"p:10"}),
            testing::Sql("select id from " + table + " where pk = 'p' and seq > -1048573"
                         " order by seq limit 1"));
  EXPECT_EQ(MemoryItems("p"), PagedItems("p"));
  EXPECT_EQ(std::vector<std::string>(), Differences());
}

TEST_F(StableBucketsOnPostgres, VerifyReadsTheColumnsAndRebuildRepairs) {
  std::vector<std::string> load;
  for (int i = 1; i <= 12; ++i) load.push_back(Comment("c" + std::to_string(i), "p", i));
  Apply(load);
  const std::string table = engine_.config.store.schema + ".pages";
  testing::Sql("update " + table + " set seq = 5, doc = jsonb_set(doc, '{seq}', '5') where id = 'p:0'");
  testing::Sql("update " + table + " set members = 3 where id = 'p:1'");
  std::string all;
  for (const std::string& line : Differences()) all += line + "\n";
  EXPECT_NE(std::string::npos, all.find("out of seq order")) << all;
  EXPECT_NE(std::string::npos, all.find("bucket p:1: its document or its columns")) << all;
  BatchStats stats;
  ASSERT_TRUE(Rebuild(engine_.plan, &engine_.store, MaintenanceOptions(), &stats).ok());
  EXPECT_EQ(std::vector<std::string>(), Differences());
  EXPECT_EQ(std::vector<std::string>({"p:0\t0", "p:1\t1", "p:2\t2"}),
            testing::Sql("select id, seq from " + table + " order by seq"));
}

// Probes whose keys lie in one bucket's range (or all before the group's
// first bucket) share their window: PostgreSQL answers one of them, with the
// same window the others would get.
TEST_F(StableBucketsOnPostgres, ProbesInOneBucketAreAnsweredOnce) {
  std::vector<std::string> load;
  for (int i = 1; i <= 40; ++i) load.push_back(Comment("c" + std::to_string(i), "p", i));
  Apply(load);  // p:0 c1..c4 ... p:9 c37..c40
  auto key = [](double at, const std::string& id) {
    JsonDocument value;
    EXPECT_TRUE(ParseJson(std::to_string(at), &value).ok());
    return IndexKey{OrderKey(&value, false), id};
  };
  const std::vector<std::pair<std::string, IndexKey>> probes = {
      {"p", key(41, "x1")}, {"p", key(1.5, "x2")}, {"p", key(42, "x3")},
      {"p", key(0.5, "x4")}, {"p", key(38, "c38")}, {"p", key(0.2, "x5")}};
  std::unique_ptr<StoreTransaction> txn;
  ASSERT_TRUE(engine_.store.Begin(&txn).ok());
  std::vector<BucketSlot> slots;
  ASSERT_TRUE(txn->buckets().ProbeBuckets(engine_.config.projections[0], probes, &slots).ok());
  std::map<size_t, std::vector<std::string>> windows;  // probe -> "id below|above"
  for (const BucketSlot& slot : slots) {
    windows[slot.probe].push_back(slot.id + (slot.below ? " below" : " above"));
  }
  for (auto& window : windows) std::sort(window.second.begin(), window.second.end());
  using Window = std::vector<std::string>;
  // Probes 0, 2 and 4 are in p:9; 3 and 5 before p:0.
  EXPECT_EQ((std::map<size_t, Window>{
                {0, Window{"p:7 below", "p:8 below", "p:9 below"}},
                {1, Window{"p:0 below", "p:1 above", "p:2 above", "p:3 above"}},
                {3, Window{"p:0 above", "p:1 above", "p:2 above"}}}),
            windows);
}

// member_keys: written with every bucket the stable layout writes, read back
// by the splice and by `verify` (which compares them with the members). A
// table from before the column gains it when the store opens; its buckets
// (null keys), like keys that do not unpack, are spliced from the index and
// get keys when written.
TEST_F(StableBucketsOnPostgres, MemberKeysAreKeptAndAnOlderTableGainsThem) {
  std::vector<std::string> load;
  for (int i = 1; i <= 40; ++i) load.push_back(Comment("c" + std::to_string(i), "p", i));
  Apply(load);  // p:0 .. p:9
  const std::string table = engine_.config.store.schema + ".pages";
  EXPECT_EQ(std::vector<std::string>({"10\t10"}),
            testing::Sql("select count(*), count(member_keys) from " + table));
  EXPECT_EQ(std::vector<std::string>(), Differences());
  testing::Sql("alter table " + table + " drop column member_keys");
  Status status = engine_.store.Open();
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(std::vector<std::string>({"10\t0"}),
            testing::Sql("select count(*), count(member_keys) from " + table));
  BatchStats stats = Apply({R"({"type":"comment","id":"c6","op":"delete"})", Comment("x", "p", 41)});
  EXPECT_EQ(0u, stats.tails_rendered);
  EXPECT_EQ(std::vector<std::string>({"p:1", "p:10", "p:9"}),  // p:9 full: x opens p:10
            testing::Sql("select id from " + table + " where member_keys is not null order by id"));
  EXPECT_EQ(std::vector<std::string>(), Differences());
  // Bytes that are not a list of keys: read as none.
  testing::Sql("update " + table + " set member_keys = '\\x05'::bytea where id = 'p:1'");
  stats = Apply({R"({"type":"comment","id":"c7","op":"delete"})"});
  EXPECT_EQ(0u, stats.tails_rendered);
  EXPECT_EQ(std::vector<std::string>(), Differences());
  EXPECT_EQ(MemoryItems("p"), PagedItems("p"));
}

}  // namespace
}  // namespace denormd
