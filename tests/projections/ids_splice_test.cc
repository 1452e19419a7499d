// {ids: ...} within a batch: a stored list takes the batch's moves instead of
// every referrer being read again, so an author with thousands of books costs
// what the change costs; a stored list that does not fit is read from the
// index, and the result is exact either way.
#include <gtest/gtest.h>

#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::InMemory;

constexpr const char* kConfig = R"(
store: {schema: ids}
entities: [author, book]
projections:
  authors:
    from: author
    fields:
      countOfBooks: {count: book, via: authorIds}
      books: {ids: book, via: authorIds}
)";

std::string Book(const std::string& id, const std::string& authors) {
  return R"({"type":"book","id":")" + id + R"(","op":"upsert","data":{"authorIds":[)" + authors +
         "]}}";
}

class IdsSplice : public ::testing::Test {
 protected:
  void SetUp() override {
    m_.Apply({R"({"type":"author","id":"a1","op":"upsert","data":{"name":"A"}})",
              R"({"type":"author","id":"a2","op":"upsert","data":{"name":"B"}})"});
    for (int start = 0; start < kBooks; start += 500) {
      std::vector<std::string> events;
      for (int i = start; i < start + 500; ++i) {
        events.push_back(Book("b" + std::to_string(10000 + i), R"("a1")"));
      }
      m_.Apply(events);
    }
    ASSERT_EQ(std::vector<std::string>(), m_.Differences());
  }

  uint64_t ReferrersRead() {
    const auto& read = m_.store().state().referrers_read;
    auto it = read.find("book.authorIds");
    return it == read.end() ? 0 : it->second;
  }

  std::string AuthorDoc(const std::string& id) {
    return m_.Documents("authors").at(id).json;
  }

  static constexpr int kBooks = 2000;
  InMemory m_{kConfig};
};

TEST_F(IdsSplice, AChangeReadsNoneOfTheOtherReferrers) {
  const uint64_t before = ReferrersRead();
  m_.Apply({Book("b00001", R"("a1","a2")"),          // joins a1 (first) and a2
            Book("b10005", R"("a2")"),               // leaves a1 for a2
            R"({"type":"book","id":"b10007","op":"delete"})",  // leaves a1
            Book("b10003", R"("a1")"),               // unchanged membership
            R"({"type":"author","id":"a1","op":"patch","data":{"name":"A2"}})"});
  // Without the splice: the 2,000 of a1 and the 2 of a2.
  EXPECT_EQ(0u, ReferrersRead() - before);
  EXPECT_EQ(std::vector<std::string>(), m_.Differences());
  const std::string a1 = AuthorDoc("a1");
  EXPECT_NE(std::string::npos, a1.find(R"("books":["b00001","b10000","b10001","b10002","b10003","b10004","b10006","b10008")"))
      << a1.substr(0, 200);
  EXPECT_NE(std::string::npos, a1.find(R"("countOfBooks":1999)")) << a1.substr(0, 200);
  EXPECT_NE(std::string::npos, AuthorDoc("a2").find(R"("books":["b00001","b10005"])"));
}

TEST_F(IdsSplice, ABatchThatMovesAndMovesBackIsExact) {
  m_.Apply({Book("b10001", R"("a2")"), Book("b10001", R"("a1")"),  // back where it was
            Book("b10002", R"("a2")"), R"({"type":"book","id":"b10002","op":"delete"})",
            Book("b20000", R"("a1")"), R"({"type":"book","id":"b20000","op":"delete"})"});
  EXPECT_EQ(std::vector<std::string>(), m_.Differences());
}

// A stored list that does not fit what the batch moved, or that the index's
// counter contradicts, is read from the index: the document comes out exact.
TEST_F(IdsSplice, AStoredListThatDoesNotFitIsReadAgain) {
  const std::string good = AuthorDoc("a1");
  for (const auto& edit : std::vector<std::pair<std::string, std::string>>{
           {"missing list", R"({"id":"a1","name":"A","countOfBooks":2000})"},
           {"not a list", R"({"id":"a1","name":"A","countOfBooks":2000,"books":"b10000"})"},
           {"unsorted", R"({"id":"a1","name":"A","countOfBooks":2000,"books":["b10001","b10000"]})"},
           {"one short", R"({"id":"a1","name":"A","countOfBooks":2000,"books":["b10000"]})"},
           {"not JSON", "{"}}) {
    SCOPED_TRACE(edit.first);
    m_.Documents("authors").at("a1").json = edit.second;
    const uint64_t before = ReferrersRead();
    m_.Apply({R"({"type":"author","id":"a1","op":"patch","data":{"n":")" + edit.first + R"("}})"});
    EXPECT_GE(ReferrersRead() - before, static_cast<uint64_t>(kBooks));
    EXPECT_EQ(std::vector<std::string>(), m_.Differences());
  }
  // And a list the batch's move does not fit: the book that leaves is not in it.
  std::string without = good;
  const size_t at = without.find("\"b10009\",");
  ASSERT_NE(std::string::npos, at);
  without.erase(at, 9);
  m_.Documents("authors").at("a1").json = without;
  m_.Apply({Book("b10009", R"("a2")")});
  EXPECT_EQ(std::vector<std::string>(), m_.Differences());
}

// A list with a `limit` reads only its first `limit` index rows (by id: the
// relation has no order), however many the target has.
TEST(IdsLimit, ReadsOnlyTheFirstRows) {
  InMemory m(R"(
store: {schema: ids}
entities: [author, book]
projections:
  first_books:
    from: author
    fields:
      books: {ids: book, via: authorIds, limit: 2}
)");
  m.Apply({R"({"type":"author","id":"a1","op":"upsert","data":{"name":"A"}})"});
  std::vector<std::string> events;
  for (int i = 0; i < 500; ++i) events.push_back(Book("b" + std::to_string(1000 + i), R"("a1")"));
  m.Apply(events);
  const uint64_t before = m.store().state().referrers_read.at("book.authorIds");
  m.Apply({R"({"type":"book","id":"b1000","op":"delete"})",
           R"({"type":"author","id":"a1","op":"patch","data":{"name":"B"}})"});
  EXPECT_EQ(2u, m.store().state().referrers_read.at("book.authorIds") - before);
  EXPECT_NE(std::string::npos, m.Documents("first_books").at("a1").json.find(R"("books":["b1001","b1002"])"))
      << m.Documents("first_books").at("a1").json;
  EXPECT_EQ(std::vector<std::string>(), m.Differences());
}

}  // namespace
}  // namespace denormd
