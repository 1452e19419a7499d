// Relations through a link entity (a join table), in memory: random link
// scenarios (tests/link_scenario.h) checked after every batch against an
// independent oracle and against `verify`; and the cases one by one: both
// sides updated by a link row, duplicates and stale re-creates, fan-out of a
// rename and its cost, deletes of either side.
#include <gtest/gtest.h>

#include "tests/link_scenario.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::InMemory;
using testing::LinkScenario;

Collections MemoryCollections(InMemory& memory) {
  Collections out;
  for (const ProjectionConfig& projection : memory.config().projections) {
    out[projection.collection];
  }
  for (const auto& collection : memory.store().state().collections) {
    for (const auto& document : collection.second) {
      out[collection.first][document.first] = document.second.json;
    }
  }
  return out;
}

class ThroughProperty : public ::testing::TestWithParam<uint32_t> {};

TEST_P(ThroughProperty, EveryBatchEqualsTheOracleAndVerify) {
  const LinkScenario scenario = testing::MakeLinkScenario(GetParam());
  InMemory memory(scenario.config);
  uint64_t stale = 0;
  for (size_t b = 0; b < scenario.batches.size(); ++b) {
    stale += memory.Apply(scenario.batches[b].events).stale;
    ASSERT_EQ("", testing::DiffDocuments(memory.config(), MemoryCollections(memory), scenario.batches[b].expected))
        << "after batch " << b << " (actual != oracle)";
    ASSERT_EQ(std::vector<std::string>(), memory.Differences()) << "after batch " << b;
  }
  EXPECT_EQ(scenario.stale, stale);
  // rebuild changes nothing.
  EXPECT_EQ(0u, memory.Rebuild().documents_written);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ThroughProperty, ::testing::Range<uint32_t>(1, 41));

TEST(ThroughScenarios, ExerciseWhatTheyClaim) {
  uint64_t stale_recreates = 0, duplicate_pairs = 0, stale = 0;
  for (uint32_t seed = 1; seed < 41; ++seed) {
    const LinkScenario scenario = testing::MakeLinkScenario(seed);
    stale += scenario.stale;
    stale_recreates += scenario.stale_recreates;
    duplicate_pairs += scenario.duplicate_pairs;
  }
  EXPECT_GT(stale, 200u);
  EXPECT_GT(stale_recreates, 20u);
  EXPECT_GT(duplicate_pairs, 20u);
}

std::string Link(const std::string& book, const std::string& author, const std::string& op,
                 int version) {
  std::string json = R"({"type":"book_author","id":")" + book + ":" + author + R"(","op":")" + op +
                     R"(","version":)" + std::to_string(version);
  if (op != "delete") {
    json += R"(,"data":{"book_id":")" + book + R"(","author_id":")" + author + R"("}})";
  } else {
    json += "}";
  }
  return json;
}

std::string Entity(const std::string& type, const std::string& id, const std::string& name,
                   int version) {
  return R"({"type":")" + type + R"(","id":")" + id + R"(","op":"upsert","version":)" +
         std::to_string(version) + R"(,"data":{"name":")" + name + R"("}})";
}

class Through : public ::testing::Test {
 protected:
  Through() : memory_(testing::LinkConfig(testing::LinkSides::kBoth)) {}

  std::string Doc(const std::string& collection, const std::string& id) {
    auto& documents = memory_.Documents(collection);
    auto it = documents.find(id);
    return it == documents.end() ? "" : it->second.json;
  }

  InMemory memory_;
};

TEST_F(Through, ALinkRowUpdatesBothSides) {
  memory_.Apply({Entity("author", "a1", "Ann", 1), Entity("book", "b1", "B", 1)});
  memory_.Apply({Link("b1", "a1", "upsert", 1)});
  EXPECT_EQ(R"({"name":"Ann","id":"a1","countOfBooks":1,"books":["b1"]})", Doc("authors", "a1"));
  EXPECT_EQ(R"({"name":"B","id":"b1","authors":[{"name":"Ann"}]})", Doc("books", "b1"));
  memory_.Apply({Link("b1", "a1", "delete", 2)});
  EXPECT_EQ(R"({"name":"Ann","id":"a1","countOfBooks":0,"books":[]})", Doc("authors", "a1"));
  EXPECT_EQ(R"({"name":"B","id":"b1","authors":[]})", Doc("books", "b1"));
  EXPECT_EQ(std::vector<std::string>(), memory_.Differences());
}

TEST_F(Through, AStaleReCreateDoesNotResurrectADeletedLink) {
  memory_.Apply({Entity("author", "a1", "Ann", 1), Entity("book", "b1", "B", 1),
                 Link("b1", "a1", "upsert", 1), Link("b1", "a1", "delete", 2)});
  // The create again, late (a duplicate), in its own batch and with others.
  BatchStats stats = memory_.Apply({Link("b1", "a1", "upsert", 1)});
  EXPECT_EQ(1u, stats.stale);
  memory_.Apply({Link("b1", "a1", "upsert", 2), Entity("book", "b2", "C", 1)});
  EXPECT_EQ(R"({"name":"Ann","id":"a1","countOfBooks":0,"books":[]})", Doc("authors", "a1"));
  EXPECT_EQ(R"({"name":"B","id":"b1","authors":[]})", Doc("books", "b1"));
  // A newer create does bring it back.
  memory_.Apply({Link("b1", "a1", "upsert", 3)});
  EXPECT_EQ(R"({"name":"Ann","id":"a1","countOfBooks":1,"books":["b1"]})", Doc("authors", "a1"));
}

TEST_F(Through, TwoRowsLinkingOnePairCountOnce) {
  memory_.Apply({Entity("author", "a1", "Ann", 1), Entity("book", "b1", "B", 1),
                 Link("b1", "a1", "upsert", 1),
                 R"({"type":"book_author","id":"x7","op":"upsert","data":{"book_id":"b1","author_id":"a1"}})"});
  EXPECT_EQ(R"({"name":"Ann","id":"a1","countOfBooks":1,"books":["b1"]})", Doc("authors", "a1"));
  EXPECT_EQ(R"({"name":"B","id":"b1","authors":[{"name":"Ann"}]})", Doc("books", "b1"));
  memory_.Apply({Link("b1", "a1", "delete", 2)});  // x7 still links them
  EXPECT_EQ(R"({"name":"Ann","id":"a1","countOfBooks":1,"books":["b1"]})", Doc("authors", "a1"));
  EXPECT_EQ(std::vector<std::string>(), memory_.Differences());
}

TEST_F(Through, ARenameFansOutToTheLinkedBooksOnly) {
  std::vector<std::string> events = {Entity("author", "a1", "Ann", 1),
                                     Entity("author", "a2", "Bob", 1)};
  for (int b = 0; b < 50; ++b) {
    const std::string book = "b" + std::to_string(b);
    events.push_back(Entity("book", book, "T", 1));
    events.push_back(Link(book, b < 3 ? "a1" : "a2", "upsert", 1));
  }
  memory_.Apply(events);
  BatchStats stats = memory_.Apply({Entity("author", "a1", "Anne", 2)});
  EXPECT_EQ(4u, stats.units_recomputed);   // a1 and its three books
  EXPECT_EQ(4u, stats.documents_written);  // a1's document too: its name is copied
  EXPECT_EQ(R"({"name":"T","id":"b2","authors":[{"name":"Anne"}]})", Doc("books", "b2"));
  EXPECT_EQ(std::vector<std::string>(), memory_.Differences());
}

TEST_F(Through, DeletingEitherSideIsLikeTheArrayCase) {
  memory_.Apply({Entity("author", "a1", "Ann", 1), Entity("author", "a2", "Bob", 1),
                 Entity("book", "b1", "B", 1), Entity("book", "b2", "C", 1),
                 Link("b1", "a1", "upsert", 1), Link("b2", "a1", "upsert", 1),
                 Link("b1", "a2", "upsert", 1)});
  // A book goes (its link rows stay): the authors stop counting it.
  memory_.Apply({R"({"type":"book","id":"b1","op":"delete","version":2})"});
  EXPECT_EQ(R"({"name":"Ann","id":"a1","countOfBooks":1,"books":["b2"]})", Doc("authors", "a1"));
  EXPECT_EQ(R"({"name":"Bob","id":"a2","countOfBooks":0,"books":[]})", Doc("authors", "a2"));
  // An author goes: the books' lookups leave it out.
  memory_.Apply({R"({"type":"author","id":"a1","op":"delete","version":2})"});
  EXPECT_EQ("", Doc("authors", "a1"));
  EXPECT_EQ(R"({"name":"C","id":"b2","authors":[]})", Doc("books", "b2"));
  // Both come back (newer versions): the surviving link rows are read again.
  memory_.Apply({Entity("book", "b1", "B2", 3), Entity("author", "a1", "Ann", 3)});
  EXPECT_EQ(R"({"name":"Ann","id":"a1","countOfBooks":2,"books":["b1","b2"]})",
            Doc("authors", "a1"));
  EXPECT_EQ(R"({"name":"B2","id":"b1","authors":[{"name":"Ann"},{"name":"Bob"}]})",
            Doc("books", "b1"));
  EXPECT_EQ(std::vector<std::string>(), memory_.Differences());
}

TEST_F(Through, RepointingALinkMovesItBetweenDocuments) {
  memory_.Apply({Entity("author", "a1", "Ann", 1), Entity("author", "a2", "Bob", 1),
                 Entity("book", "b1", "B", 1), Entity("book", "b2", "C", 1),
                 Link("b1", "a1", "upsert", 1)});
  memory_.Apply(
      {R"({"type":"book_author","id":"b1:a1","op":"patch","version":2,"data":{"book_id":"b2","author_id":"a2"}})"});
  EXPECT_EQ(R"({"name":"Ann","id":"a1","countOfBooks":0,"books":[]})", Doc("authors", "a1"));
  EXPECT_EQ(R"({"name":"Bob","id":"a2","countOfBooks":1,"books":["b2"]})", Doc("authors", "a2"));
  EXPECT_EQ(R"({"name":"B","id":"b1","authors":[]})", Doc("books", "b1"));
  EXPECT_EQ(R"({"name":"C","id":"b2","authors":[{"name":"Bob"}]})", Doc("books", "b2"));
  EXPECT_EQ(std::vector<std::string>(), memory_.Differences());
}

}  // namespace
}  // namespace denormd
