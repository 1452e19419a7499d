// What a change through a link costs: count, ids and lookup through a join
// table read and write the same number of stored rows for an author linked
// to 20,000 books as for one linked to a single book (the relation kept
// through the link: linked_rows.h), and the documents stay exact.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::InMemory;

constexpr const char* kConfig = R"(
store: {schema: through_cost}
entities: [author, book, book_author]
projections:
  authors:
    from: author
    fields:
      name: name
      countOfBooks: {count: book, through: book_author, from: author_id, to: book_id}
      books: {ids: book, through: book_author, from: author_id, to: book_id}
  books:
    from: book
    fields:
      title: title
      authors: {lookup: author, through: book_author, from: book_id, to: author_id, select: [name]}
)";

constexpr int kBooksOfA0 = 20000;

std::string Upsert(const std::string& type, const std::string& id, const std::string& data) {
  return R"({"type":")" + type + R"(","id":")" + id + R"(","op":"upsert","data":)" + data + "}";
}
std::string Delete(const std::string& type, const std::string& id) {
  return R"({"type":")" + type + R"(","id":")" + id + R"(","op":"delete"})";
}
std::string Link(const std::string& id, const std::string& author, const std::string& book) {
  return Upsert("book_author", id,
                R"({"author_id":")" + author + R"(","book_id":")" + book + R"("})");
}

// Every stored row a batch reads or writes, summed over the store's
// counters, and the documents it writes.
struct Cost {
  uint64_t referrers_read = 0;
  uint64_t entities_loaded = 0;
  uint64_t index_rows_written = 0;
  uint64_t documents_written = 0;
  bool operator==(const Cost& o) const {
    return referrers_read == o.referrers_read && entities_loaded == o.entities_loaded &&
           index_rows_written == o.index_rows_written && documents_written == o.documents_written;
  }
};

std::ostream& operator<<(std::ostream& out, const Cost& cost) {
  return out << "{referrers read " << cost.referrers_read << ", entities loaded "
             << cost.entities_loaded << ", index rows written " << cost.index_rows_written
             << ", documents written " << cost.documents_written << "}";
}

Cost Counters(InMemory& m) {
  const MemoryState& state = m.store().state();
  Cost cost;
  for (const auto& entry : state.referrers_read) cost.referrers_read += entry.second;
  cost.entities_loaded = state.entities_loaded;
  cost.index_rows_written = state.index_rows_written;
  for (const auto& entry : state.document_writes) cost.documents_written += entry.second;
  return cost;
}

Cost CostOf(InMemory& m, const std::vector<std::string>& events) {
  const Cost before = Counters(m);
  m.Apply(events);
  const Cost after = Counters(m);
  return {after.referrers_read - before.referrers_read,
          after.entities_loaded - before.entities_loaded,
          after.index_rows_written - before.index_rows_written,
          after.documents_written - before.documents_written};
}

class ThroughCost : public ::testing::Test {
 protected:
  void SetUp() override {
    m_.Apply({Upsert("author", "a0", R"({"name":"Big"})"),
              Upsert("author", "a1", R"({"name":"Small"})")});
    for (int start = 0; start < kBooksOfA0; start += 1000) {
      std::vector<std::string> events;
      for (int i = start; i < start + 1000; ++i) {
        const std::string book = "b" + std::to_string(100000 + i);
        events.push_back(Upsert("book", book, R"({"title":"T"})"));
        events.push_back(Link("l" + book, "a0", book));
      }
      m_.Apply(events);
    }
    m_.Apply({Upsert("book", "c100000", R"({"title":"T"})"), Link("lc100000", "a1", "c100000")});
  }

  // The same change on the side of `author`, whose books are named with
  // `prefix`: a new book linked, a second row for the same pair, the link
  // repointed to the new book, both rows deleted, the book deleted and
  // created again, its title changed.
  std::vector<Cost> Changes(const std::string& author, const std::string& prefix) {
    const std::string book = prefix + "900000";
    const std::string old_book = prefix + "100000";
    std::vector<Cost> costs;
    costs.push_back(CostOf(m_, {Upsert("book", book, R"({"title":"N"})"),
                                Link("n" + book, author, book)}));
    costs.push_back(CostOf(m_, {Link("m" + book, author, book)}));  // the pair linked twice
    costs.push_back(CostOf(m_, {Link("l" + old_book, author, book)}));  // repointed
    costs.push_back(CostOf(m_, {Delete("book_author", "n" + book)}));
    costs.push_back(CostOf(m_, {Delete("book_author", "m" + book)}));
    costs.push_back(CostOf(m_, {Delete("book", book)}));  // linked by l<old_book>
    costs.push_back(CostOf(m_, {Upsert("book", book, R"({"title":"M"})")}));
    costs.push_back(CostOf(m_, {Upsert("book", book, R"({"title":"K"})")}));
    return costs;
  }

  std::string AuthorDoc(const std::string& id) { return m_.Documents("authors").at(id).json; }

  InMemory m_{kConfig};
};

TEST_F(ThroughCost, ALinkChangeCostsTheSameWhateverTheLinkedSetHolds) {
  const std::vector<Cost> big = Changes("a0", "b");
  const std::vector<Cost> small = Changes("a1", "c");
  ASSERT_EQ(big.size(), small.size());
  for (size_t i = 0; i < big.size(); ++i) {
    EXPECT_EQ(small[i], big[i]) << "change " << i;
    // Not a reading of the linked set: a0's 20,000 books would show.
    EXPECT_LT(big[i].referrers_read + big[i].entities_loaded, 20u) << "change " << i;
  }
  // The documents are what the source defines.
  EXPECT_EQ(std::vector<std::string>(), m_.Differences());
  EXPECT_NE(std::string::npos, AuthorDoc("a0").find(R"("countOfBooks":20000)"))
      << AuthorDoc("a0").substr(0, 120);
  EXPECT_NE(std::string::npos, AuthorDoc("a1").find(R"("countOfBooks":1,"books":["c900000"])"))
      << AuthorDoc("a1");
}

TEST_F(ThroughCost, ADanglingOrDoubledLinkCountsOnce) {
  m_.Apply({Link("x1", "a1", "nobook"), Link("x2", "a1", "c100000"),
            Link("x3", "a1", "c100000")});
  EXPECT_NE(std::string::npos,
            AuthorDoc("a1").find(R"("countOfBooks":1,"books":["c100000"])"))
      << AuthorDoc("a1");
  m_.Apply({Upsert("book", "nobook", R"({"title":"Now"})")});  // the dangling link comes alive
  EXPECT_NE(std::string::npos,
            AuthorDoc("a1").find(R"("countOfBooks":2,"books":["c100000","nobook"])"))
      << AuthorDoc("a1");
  m_.Apply({Delete("book_author", "lc100000"), Delete("book_author", "x2")});  // x3 still links
  EXPECT_NE(std::string::npos, AuthorDoc("a1").find(R"("countOfBooks":2)")) << AuthorDoc("a1");
  m_.Apply({Delete("book_author", "x3")});
  EXPECT_NE(std::string::npos, AuthorDoc("a1").find(R"("countOfBooks":1,"books":["nobook"])"))
      << AuthorDoc("a1");
  EXPECT_EQ(std::vector<std::string>(), m_.Differences());
}

// A limited list through a link reads its first rows by index: the same few
// for 20,000 links, which the list above splices instead.
TEST(ThroughCostLimited, ALimitedListReadsItsFirstRowsOnly) {
  const std::string config = std::string(kConfig) + R"(
  first_books:
    from: author
    collection: first_books
    fields:
      firstBooks: {ids: book, through: book_author, from: author_id, to: book_id, limit: 3}
)";
  InMemory m(config);
  m.Apply({Upsert("author", "a0", R"({"name":"Big"})")});
  std::vector<std::string> events;
  for (int i = 0; i < kBooksOfA0; ++i) {
    const std::string book = "b" + std::to_string(100000 + i);
    events.push_back(Upsert("book", book, R"({"title":"T"})"));
    events.push_back(Link("l" + book, "a0", book));
  }
  m.Apply(events);
  const Cost cost = CostOf(m, {Delete("book_author", "lb100001")});
  EXPECT_LT(cost.referrers_read + cost.entities_loaded, 20u) << cost;
  EXPECT_NE(std::string::npos, m.Documents("first_books").at("a0").json.find(
                                   R"("firstBooks":["b100000","b100002","b100003"])"))
      << m.Documents("first_books").at("a0").json;
  EXPECT_EQ(std::vector<std::string>(), m.Differences());
}

// An author's change finds the books to rewrite from the link rows naming
// it keys only: each side of a link is kept in the order of the other side's
// value, so its index row holds the other id. A row whose other side is an
// array (no one id in its key) is read with its data instead.
TEST(ThroughKeysOnly, ARenameFindsItsLinkedBooksWithoutLoadingTheLinkRows) {
  InMemory m(kConfig);
  m.Apply({Upsert("author", "a1", R"({"name":"One"})"), Upsert("author", "a2", R"({"name":"Two"})"),
           Upsert("book", "b1", R"({"title":"T"})"), Upsert("book", "b2", R"({"title":"T"})"),
           Upsert("book", "b3", R"({"title":"T"})"), Link("l1", "a1", "b1"),
           Link("l2", "a1", "b2"),
           Upsert("book_author", "l3", R"({"author_id":"a2","book_id":["b3","b1"]})")});
  const uint64_t loaded = m.store().state().referrers_loaded;
  m.Apply({Upsert("author", "a1", R"({"name":"Uno"})")});
  EXPECT_EQ(loaded, m.store().state().referrers_loaded);
  m.Apply({Upsert("author", "a2", R"({"name":"Dos"})")});
  EXPECT_LT(loaded, m.store().state().referrers_loaded);  // l3, with its data
  const auto books = m.Documents("books");
  EXPECT_NE(std::string::npos, books.at("b1").json.find("Uno")) << books.at("b1").json;
  EXPECT_NE(std::string::npos, books.at("b1").json.find("Dos")) << books.at("b1").json;
  EXPECT_NE(std::string::npos, books.at("b2").json.find("Uno")) << books.at("b2").json;
  EXPECT_NE(std::string::npos, books.at("b3").json.find("Dos")) << books.at("b3").json;
  EXPECT_EQ(std::vector<std::string>(), m.Differences());
}

// Whether a pair is linked, where no field reads the link in a link order,
// is asked of the link's `from` side (kept in the order of the `to` value),
// not of a row kept per pair: a pair named only by a row whose `to` is an
// array is found among that side's rows of no one string.
TEST(ThroughPairs, APairStillNamedThroughAnArrayStaysLinked) {
  InMemory m(kConfig);
  m.Apply({Upsert("author", "a1", R"({"name":"One"})"), Upsert("book", "b1", R"({"title":"T"})"),
           Upsert("book", "b2", R"({"title":"T"})"), Link("l1", "a1", "b1"),
           Upsert("book_author", "l2", R"({"author_id":"a1","book_id":["b2","b1"]})")});
  const auto counted = [&] { return m.Documents("authors").at("a1").json; };
  EXPECT_NE(std::string::npos, counted().find(R"("countOfBooks":2,"books":["b1","b2"])"))
      << counted();
  m.Apply({Delete("book_author", "l1")});  // b1 still linked, through l2's array
  EXPECT_NE(std::string::npos, counted().find(R"("countOfBooks":2,"books":["b1","b2"])"))
      << counted();
  m.Apply({Upsert("book_author", "l2", R"({"author_id":"a1","book_id":["b2"]})")});
  EXPECT_NE(std::string::npos, counted().find(R"("countOfBooks":1,"books":["b2"])")) << counted();
  EXPECT_EQ(std::vector<std::string>(), m.Differences());
}

}  // namespace
}  // namespace denormd
