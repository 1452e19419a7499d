// The `stable` bucket layout (docs/architecture.md, "Stable buckets"):
// appends give the packed layout, a change rewrites at most a few buckets
// whatever the group's size, the fill invariants hold after every batch,
// `verify` names every broken invariant and `rebuild` repairs it, and a
// random stream (Zipf-hot groups of 10,000+ members, moves, order-key edits,
// deletes anywhere) stays exact at batch sizes 1, 7 and 5000.
#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "projections/buckets/bucket_documents.h"
#include "projections/buckets/bucket_tables.h"
#include "projections/buckets/stable_layout.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::InMemory;

std::string Config(uint64_t size, const std::string& layout = "stable") {
  return "store: {schema: stable}\nentities: [comment]\nprojections:\n"
         "  pages: {buckets: comment, by: postId, size: " + std::to_string(size) +
         ", order_by: at, select: [id, text], layout: " + layout + "}\n";
}

std::string Comment(const std::string& id, const std::string& post, double at,
                    const std::string& text = "t") {
  std::string number = std::to_string(at);
  return R"({"type":"comment","id":")" + id + R"(","op":"upsert","data":{"postId":")" + post +
         R"(","at":)" + number + R"(,"text":")" + text + R"("}})";
}

std::string Delete(const std::string& id) {
  return R"({"type":"comment","id":")" + id + R"(","op":"delete"})";
}

std::string Id(int i) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "c%05d", i);
  return buffer;
}

// Comments 1..n of post p, at = i, in batches of `batch`.
void LoadInOrder(InMemory* m, int n, int batch, const std::string& post = "p") {
  std::vector<std::string> events;
  for (int i = 1; i <= n; ++i) {
    events.push_back(Comment(Id(i), post, i));
    if (static_cast<int>(events.size()) == batch || i == n) {
      m->Apply(events);
      events.clear();
    }
  }
}

uint64_t Writes(InMemory& m) { return m.store().state().document_writes.count("pages")
                                          ? m.store().state().document_writes.at("pages")
                                          : 0; }

// The pages' ids in seq order, with their item counts: "p:0=4 p:1=4 ...".
std::string Shape(InMemory& m) {
  std::vector<std::pair<int64_t, std::string>> pages;
  for (const auto& doc : m.Documents("pages")) {
    std::vector<std::string> items;
    EXPECT_TRUE(SplitArrayField(doc.second.json, "items", &items)) << doc.second.json;
    pages.push_back({doc.second.bucket->seq, doc.first + "=" + std::to_string(items.size())});
  }
  std::sort(pages.begin(), pages.end());
  std::string out;
  for (const auto& page : pages) out += (out.empty() ? "" : " ") + page.second;
  return out;
}

TEST(StableBuckets, AppendsInOrderGiveExactlyThePackedLayout) {
  InMemory stable(Config(4)), packed(Config(4, "packed"));
  LoadInOrder(&stable, 10, 3);
  LoadInOrder(&packed, 10, 3);
  EXPECT_EQ("p:0=4 p:1=4 p:2=2", Shape(stable));
  ASSERT_EQ(packed.Documents("pages").size(), stable.Documents("pages").size());
  for (const auto& doc : packed.Documents("pages")) {
    JsonDocument a, b;
    ASSERT_TRUE(ParseJson(doc.second.json, &a).ok());
    ASSERT_TRUE(ParseJson(stable.Documents("pages")[doc.first].json, &b).ok());
    EXPECT_TRUE(JsonEquals(a, b)) << doc.first << ": " << doc.second.json;
    EXPECT_EQ(doc.second.bucket->seq, stable.Documents("pages")[doc.first].bucket->seq);
    // Member keys are kept for the stable splice only.
    EXPECT_FALSE(doc.second.bucket->member_keys) << doc.first;
    EXPECT_TRUE(stable.Documents("pages")[doc.first].bucket->member_keys) << doc.first;
  }
  EXPECT_EQ(std::vector<std::string>(), stable.Differences());
}

TEST(StableBuckets, ADeleteInTheMiddleRewritesOnlyItsBucket) {
  InMemory stable(Config(100)), packed(Config(100, "packed"));
  LoadInOrder(&stable, 10000, 5000);
  LoadInOrder(&packed, 10000, 5000);
  const uint64_t stable_before = Writes(stable), packed_before = Writes(packed);
  stable.Apply({Delete(Id(150))});
  packed.Apply({Delete(Id(150))});
  EXPECT_EQ(1u, Writes(stable) - stable_before);
  EXPECT_EQ(99u, Writes(packed) - packed_before);  // every later bucket, and the last one gone
  EXPECT_EQ(std::vector<std::string>(), stable.Differences());
  EXPECT_EQ(std::vector<std::string>(), packed.Differences());
  // The member's bucket lost it; every other bucket kept its members.
  EXPECT_NE(std::string::npos, Shape(stable).find("p:1=99"));
}

// A group appended in order has the packed numbering (seq 0, 1, 2, ...), so
// the first split in its middle finds no room: the buckets on the shorter
// side of the gap are re-spaced, the others keep their seqs.
TEST(StableBuckets, AnInsertIntoAFullBucketSplitsItAndTheShorterSideIsRespaced) {
  const int64_t gap = StableLayout::kSeqGap;
  InMemory m(Config(4));
  LoadInOrder(&m, 40, 40);  // p:0 .. p:9, full, seq 0 .. 9
  ASSERT_EQ("p:0=4 p:1=4 p:2=4 p:3=4 p:4=4 p:5=4 p:6=4 p:7=4 p:8=4 p:9=4", Shape(m));
  uint64_t before = Writes(m);
  BatchStats stats = m.Apply({Comment("x1", "p", 10.5)});  // into p:2 (c9..c12)
  EXPECT_EQ(0u, stats.tails_rendered);
  // No integer between seq 2 and 3: p:0 .. p:2 (3 buckets, against 7 after
  // the gap) re-spaced to end below 3, then p:2 and the new bucket written.
  EXPECT_EQ(3u + 2u, Writes(m) - before);
  EXPECT_EQ("p:0=4 p:1=4 p:2=3 p:10=2 p:3=4 p:4=4 p:5=4 p:6=4 p:7=4 p:8=4 p:9=4", Shape(m));
  EXPECT_EQ(3 - 3 * gap, m.Documents("pages")["p:0"].bucket->seq);
  EXPECT_EQ(3 - gap, m.Documents("pages")["p:2"].bucket->seq);
  EXPECT_EQ(3 - gap / 2, m.Documents("pages")["p:10"].bucket->seq);
  EXPECT_EQ(3, m.Documents("pages")["p:3"].bucket->seq);
  // A split on the re-spaced side finds room: two writes.
  before = Writes(m);
  m.Apply({Comment("x2", "p", 6.5)});  // into p:1 (c5..c8)
  EXPECT_EQ(2u, Writes(m) - before);
  // Near the group's end the shorter side is after the gap: p:9 alone moves
  // up, to 8 + gap.
  before = Writes(m);
  m.Apply({Comment("x3", "p", 34.5)});  // into p:8 (c33..c36)
  EXPECT_EQ(1u + 2u, Writes(m) - before);
  EXPECT_EQ(8, m.Documents("pages")["p:8"].bucket->seq);
  EXPECT_EQ(8 + gap, m.Documents("pages")["p:9"].bucket->seq);
  EXPECT_EQ(std::vector<std::string>(), m.Differences());
}

// One batch splitting at two full gaps re-spaces once, across both.
TEST(StableBuckets, SplitsAtTwoFullGapsShareOneRespacing) {
  InMemory m(Config(4));
  LoadInOrder(&m, 40, 40);  // p:0 .. p:9, seq 0 .. 9
  const uint64_t before = Writes(m);
  m.Apply({Comment("x1", "p", 14.5), Comment("x2", "p", 22.5)});  // into p:3 and p:5
  // From after seq 3 to before seq 6: p:4 .. p:9 (6) against p:0 .. p:5 (6),
  // a tie: the buckets after the gap move; then 2 splits, 2 writes each.
  EXPECT_EQ(6u + 4u, Writes(m) - before);
  EXPECT_EQ(3, m.Documents("pages")["p:3"].bucket->seq);
  EXPECT_EQ(3 + StableLayout::kSeqGap, m.Documents("pages")["p:4"].bucket->seq);
  EXPECT_EQ(std::vector<std::string>(), m.Differences());
}

TEST(StableBuckets, AnUnderfullBucketBorrowsOrMerges) {
  InMemory m(Config(4));
  LoadInOrder(&m, 12, 12);  // p:0 c1-c4, p:1 c5-c8, p:2 c9-c12
  uint64_t before = Writes(m);
  m.Apply({Delete(Id(1)), Delete(Id(2)), Delete(Id(3))});  // p:0 keeps 1 < 2
  EXPECT_EQ("p:0=3 p:1=2 p:2=4", Shape(m));                // borrowed from p:1
  EXPECT_EQ(2u, Writes(m) - before);
  before = Writes(m);
  m.Apply({Delete(Id(7))});  // p:1 keeps c8: borrows from the next, p:2
  EXPECT_EQ("p:0=3 p:1=3 p:2=2", Shape(m));
  EXPECT_EQ(2u, Writes(m) - before);
  m.Apply({Delete(Id(4)), Delete(Id(8))});  // p:0 c5 c6, p:1 c9 c10, p:2 c11 c12
  EXPECT_EQ("p:0=2 p:1=2 p:2=2", Shape(m));
  before = Writes(m);
  m.Apply({Delete(Id(5))});  // p:0 keeps c6; c6 + p:1 fit in one: merged
  EXPECT_EQ("p:0=3 p:2=2", Shape(m));
  EXPECT_EQ(2u, Writes(m) - before);  // p:0 written, p:1 deleted
  EXPECT_EQ(std::vector<std::string>(), m.Differences());
  m.Apply({Delete(Id(6)), Delete(Id(9)), Delete(Id(10))});
  EXPECT_EQ("p:2=2", Shape(m));  // an emptied bucket is deleted
  before = Writes(m);
  // The group emptied: its last bucket deleted, spliced (nothing rendered,
  // so no warning that the stored buckets did not fit).
  BatchStats stats = m.Apply({Delete(Id(11)), Delete(Id(12))});
  EXPECT_EQ("", Shape(m));
  EXPECT_EQ(1u, Writes(m) - before);
  EXPECT_EQ(0u, stats.tails_rendered);
  EXPECT_EQ(std::vector<std::string>(), m.Differences());
}

TEST(StableBuckets, EmptyingAGroupOrItsTailRendersNothing) {
  InMemory m(Config(4));
  LoadInOrder(&m, 1, 1, "a");
  BatchStats stats = m.Apply({Delete(Id(1))});  // the only member of group a
  EXPECT_EQ(0u, stats.tails_rendered);
  EXPECT_EQ(0u, m.Documents("pages").size());
  LoadInOrder(&m, 12, 12, "b");  // b:0 c1-c4, b:1 c5-c8, b:2 c9-c12
  stats = m.Apply({Delete(Id(9)), Delete(Id(10)), Delete(Id(11)), Delete(Id(12))});
  EXPECT_EQ(0u, stats.tails_rendered);
  EXPECT_EQ("b:0=4 b:1=4", Shape(m));
  // A member leaving for another group empties its own.
  m.Apply({Comment("x", "c", 1)});
  stats = m.Apply({Comment("x", "b", 9)});
  EXPECT_EQ(0u, stats.tails_rendered);
  EXPECT_EQ("b:0=4 b:1=4 b:2=1", Shape(m));
  EXPECT_EQ(std::vector<std::string>(), m.Differences());
}

// The keys of comments c<i> (at = i), in the order given.
std::vector<IndexKey> MemberKeys(const std::vector<int>& members) {
  std::vector<IndexKey> keys;
  for (int i : members) {
    JsonDocument at;
    EXPECT_TRUE(ParseJson(std::to_string(i), &at).ok());
    keys.push_back(IndexKey{OrderKey(&at, false), Id(i)});
  }
  return keys;
}

// Members of the pages' groups read from the reference index so far.
uint64_t IndexReads(InMemory& m) {
  uint64_t reads = 0;
  for (const auto& entry : m.store().state().referrers_read) {
    if (entry.first.rfind("comment.postId", 0) == 0) reads += entry.second;
  }
  return reads;
}

TEST(PackIndexKeys, ReadsBackWhatItWroteAndRefusesOtherBytes) {
  const std::vector<IndexKey> keys = {{"", "a"},
                                      {std::string("\0\xff\x80", 3), std::string(200, 'x')},
                                      {std::string(130, '\x7f'), ""}};
  const std::string bytes = PackIndexKeys(keys);
  std::vector<IndexKey> back;
  ASSERT_TRUE(UnpackIndexKeys(bytes, &back));
  EXPECT_TRUE(back == keys);
  ASSERT_TRUE(UnpackIndexKeys("", &back));
  EXPECT_TRUE(back.empty());
  for (size_t cut = 1; cut < bytes.size(); cut += 37) {
    EXPECT_FALSE(UnpackIndexKeys(bytes.substr(0, bytes.size() - cut), &back)) << cut;
  }
  EXPECT_FALSE(UnpackIndexKeys("\x05", &back));
  EXPECT_FALSE(UnpackIndexKeys(std::string(11, '\xff'), &back));  // a varint that never ends
}

// A batch splices a run of buckets from their stored member keys and its own
// changes: an insert that splits a bucket, a delete, an in-place edit, an
// order-key edit and an append read none of the group's members from the
// reference index.
TEST(StableBuckets, ASpliceTakesItsMembersFromTheStoredKeys) {
  InMemory m(Config(4));
  LoadInOrder(&m, 40, 40);
  for (const auto& doc : m.Documents("pages")) ASSERT_TRUE(doc.second.bucket->member_keys) << doc.first;
  const uint64_t reads = IndexReads(m);
  BatchStats stats = m.Apply({Comment("x1", "p", 10.5), Delete(Id(20)),
                              Comment(Id(30), "p", 30, "edited"), Comment(Id(25), "p", 2.5),
                              Comment("x2", "p", 41)});
  EXPECT_EQ(0u, stats.tails_rendered);
  EXPECT_EQ(reads, IndexReads(m));
  EXPECT_EQ(std::vector<std::string>(), m.Differences());
}

// Buckets without keys (written by the packed splice, or before the column
// existed) and keys that do not fit the batch's changes: the run's members
// are read from the index instead, the result is exact, and the buckets
// written carry keys again.
TEST(StableBuckets, BucketsWithoutKeysOrWithKeysThatDoNotFitReadTheIndex) {
  InMemory m(Config(4));
  LoadInOrder(&m, 40, 40);
  for (auto& doc : m.Documents("pages")) doc.second.bucket->member_keys.reset();
  uint64_t reads = IndexReads(m);
  BatchStats stats = m.Apply({Delete(Id(6)), Comment("x1", "p", 41)});  // p:1 and p:9
  EXPECT_EQ(0u, stats.tails_rendered);
  EXPECT_LT(reads, IndexReads(m));
  EXPECT_EQ(std::vector<std::string>(), m.Differences());
  for (const char* id : {"p:1", "p:9"}) {
    ASSERT_TRUE(m.Documents("pages")[id].bucket->member_keys) << id;
    std::vector<IndexKey> keys;
    ASSERT_TRUE(UnpackIndexKeys(*m.Documents("pages")[id].bucket->member_keys, &keys)) << id;
    EXPECT_EQ(m.Documents("pages")[id].bucket->members, keys.size()) << id;
  }
  EXPECT_FALSE(m.Documents("pages")["p:4"].bucket->member_keys);
  // p:4 holds c17..c20; keys that lack c18 cannot take its delete.
  std::vector<IndexKey> keys = MemberKeys({17, 18, 19, 20});
  keys[1].id = "c00018x";
  m.Documents("pages")["p:4"].bucket->member_keys = PackIndexKeys(keys);
  reads = IndexReads(m);
  stats = m.Apply({Delete(Id(18))});
  EXPECT_EQ(0u, stats.tails_rendered);
  EXPECT_LT(reads, IndexReads(m));
  EXPECT_EQ(std::vector<std::string>(), m.Differences());
}

// A stored bucket edited so that one invariant breaks; verify must name it,
// and rebuild must repair it.
struct BrokenInvariant {
  const char* name;
  const char* reported;
  std::function<void(InMemory* m)> edit;
};

// Replaces bucket `id` with `items` (its ids), keeping its seq and number.
void SetItems(InMemory* m, const std::string& id, const std::vector<int>& members,
              std::optional<int64_t> seq = std::nullopt) {
  auto& doc = m->Documents("pages")[id];
  std::vector<std::string> items;
  for (int i : members) items.push_back(R"({"id":")" + Id(i) + R"(","text":"t"})");
  BucketMeta meta = *doc.bucket;
  if (seq) meta.seq = *seq;
  DocumentRow row = BucketDocument(m->config().projections[0], "p", meta, items, 0, items.size());
  row.bucket->member_keys = PackIndexKeys(MemberKeys(members));
  if (!members.empty()) row.bucket->lo = MemberKeys(members).front();
  doc.json = row.json;
  doc.bucket = row.bucket;
}

void PrintTo(const BrokenInvariant& broken, std::ostream* os) { *os << broken.name; }

class StableVerify : public ::testing::TestWithParam<BrokenInvariant> {};

TEST_P(StableVerify, NamesTheBrokenInvariantAndRebuildRepairsIt) {
  InMemory m(Config(4));
  LoadInOrder(&m, 10, 10);  // p:0 c1-c4, p:1 c5-c8, p:2 c9-c10
  ASSERT_EQ(std::vector<std::string>(), m.Differences());
  GetParam().edit(&m);
  std::vector<std::string> differences = m.Differences();
  std::string all;
  for (const std::string& line : differences) all += line + "\n";
  EXPECT_NE(std::string::npos, all.find(GetParam().reported)) << all;
  m.Rebuild();
  EXPECT_EQ(std::vector<std::string>(), m.Differences());
  EXPECT_EQ("p:0=4 p:1=4 p:2=2", Shape(m));
}

INSTANTIATE_TEST_SUITE_P(
    Edits, StableVerify,
    ::testing::Values(
        BrokenInvariant{"EmptyBucket", "bucket p:7 is empty",
                        [](InMemory* m) {
                          m->Documents("pages")["p:7"] = m->Documents("pages")["p:2"];
                          m->Documents("pages")["p:7"].id = "p:7";
                          m->Documents("pages")["p:7"].bucket->number = 7;
                          SetItems(m, "p:7", {}, 7);
                        }},
        BrokenInvariant{"OverfullBucket", "holds 6 members, more than size 4",
                        [](InMemory* m) {
                          SetItems(m, "p:1", {5, 6, 7, 8, 9, 10});
                          m->Documents("pages").erase("p:2");
                        }},
        BrokenInvariant{"UnderfullBucketNotLast", "though it is not the group's last",
                        [](InMemory* m) {
                          SetItems(m, "p:0", {1});
                          SetItems(m, "p:1", {2, 3, 4, 5});
                          m->Documents("pages")["p:3"] = m->Documents("pages")["p:2"];
                          m->Documents("pages")["p:3"].id = "p:3";
                          m->Documents("pages")["p:3"].bucket->number = 3;
                          SetItems(m, "p:3", {9, 10}, 3);
                          SetItems(m, "p:2", {6, 7, 8});
                        }},
        BrokenInvariant{"SeqOutOfOrder", "out of seq order",
                        [](InMemory* m) {
                          SetItems(m, "p:0", {1, 2, 3, 4}, 1);
                          SetItems(m, "p:1", {5, 6, 7, 8}, 0);
                        }},
        BrokenInvariant{"MemberInTwoBuckets", "member c00005 is in more than one bucket",
                        [](InMemory* m) { SetItems(m, "p:2", {5, 9, 10}); }},
        BrokenInvariant{"MissingMember", "member c00006 is in no bucket",
                        [](InMemory* m) { SetItems(m, "p:1", {5, 7, 8}); }},
        BrokenInvariant{"WrongMemberKeys", "p:1: its member_keys column is not its members' keys",
                        [](InMemory* m) {
                          std::vector<IndexKey> keys = MemberKeys({5, 6, 7, 8});
                          keys[2].id = "c00099";
                          m->Documents("pages")["p:1"].bucket->member_keys = PackIndexKeys(keys);
                        }}),
    [](const ::testing::TestParamInfo<BrokenInvariant>& info) { return info.param.name; });

// The random stream: each event is a member change of one group, or of two
// (a move), unless it changes nothing a bucket shows.
struct RandomStream {
  explicit RandomStream(uint64_t seed) : random(seed) {}

  // Post p0 is hot (10,000 comments); p1..p9 get the rest, Zipf-like.
  std::string Post() {
    static const double kWeights[] = {50, 12, 7, 5, 4, 3, 3, 2, 2, 2};
    std::discrete_distribution<int> pick(std::begin(kWeights), std::end(kWeights));
    return "p" + std::to_string(pick(random));
  }

  std::string Next(uint64_t* member_changes) {
    const int op = static_cast<int>(random() % 100);
    if (op < 40 || live.size() < 10) {  // a new comment, usually at the end
      const std::string id = "n" + std::to_string(++next_id);
      const double at = op < 25 ? ++clock : std::uniform_real_distribution<double>(0, clock)(random);
      live[id] = {Post(), at};
      ++*member_changes;
      return Comment(id, live[id].first, at);
    }
    auto it = std::next(live.begin(), static_cast<long>(random() % live.size()));
    if (op < 55) {  // a delete anywhere, sometimes the first member of the hot group
      std::string id = it->first;
      if (op < 45) {
        double first = 1e18;
        for (const auto& entry : live) {
          if (entry.second.first == "p0" && entry.second.second < first) {
            first = entry.second.second;
            id = entry.first;
          }
        }
      }
      live.erase(id);
      ++*member_changes;
      return Delete(id);
    }
    if (op < 70) {  // a move to another group
      it->second.first = Post();
      *member_changes += 2;
      return Comment(it->first, it->second.first, it->second.second);
    }
    if (op < 85) {  // an order-key edit: a move inside the group
      it->second.second = std::uniform_real_distribution<double>(0, clock)(random);
      ++*member_changes;
      return Comment(it->first, it->second.first, it->second.second);
    }
    ++*member_changes;  // in place: only the item changes
    return Comment(it->first, it->second.first, it->second.second, "e" + std::to_string(op));
  }

  std::mt19937_64 random;
  std::map<std::string, std::pair<std::string, double>> live;  // id -> (post, at)
  double clock = 0;
  int next_id = 0;
};

class StableProperty : public ::testing::TestWithParam<size_t> {};

TEST_P(StableProperty, EveryBatchIsExactWithinTheInvariantsAndCheap) {
  const size_t batch = GetParam();
  InMemory m(Config(50));
  RandomStream stream(20261126 + batch);
  // The hot group: 10,000 comments in order, loaded in batches of 5,000.
  std::vector<std::string> load;
  for (int i = 1; i <= 10000; ++i) {
    const std::string id = "h" + std::to_string(i);
    stream.live[id] = {"p0", static_cast<double>(i)};
    load.push_back(Comment(id, "p0", i));
    if (load.size() == 5000) {
      m.Apply(load);
      load.clear();
    }
  }
  stream.clock = 10000;
  const size_t events = batch == 1 ? 400 : batch == 7 ? 1400 : 15000;
  const uint64_t writes_before = Writes(m);
  uint64_t member_changes = 0;
  BatchStats total;
  for (size_t done = 0; done < events; done += batch) {
    std::vector<std::string> round;
    for (size_t i = 0; i < batch && done + i < events; ++i) {
      round.push_back(stream.Next(&member_changes));
    }
    total.Add(m.Apply(round));
    const std::vector<std::string> differences = m.Differences();
    ASSERT_TRUE(differences.empty()) << "after " << done + round.size()
                                     << " events: " << differences[0];
  }
  EXPECT_EQ(0u, total.tails_rendered);
  const uint64_t writes = Writes(m) - writes_before;
  EXPECT_LE(writes, 3 * member_changes) << writes << " bucket writes for " << member_changes
                                         << " member changes";
  // The hot group stayed large, so a change in it could not rewrite its tail.
  size_t hot = 0;
  for (const auto& entry : stream.live) hot += entry.second.first == "p0" ? 1 : 0;
  EXPECT_GT(hot, 9000u);
}

INSTANTIATE_TEST_SUITE_P(BatchSizes, StableProperty, ::testing::Values(1, 7, 5000));

}  // namespace
}  // namespace denormd
