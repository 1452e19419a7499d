// `denormd advise`'s measurements and recommendations (projections/advice.h)
// on a hand-made model with known bad choices, in memory: a hot author in
// 1,500 books (an `ids` without limit, and a lookup copying the author into
// every book), a post with 1,200 embedded comments, a join table with a
// repeated and a dangling row. The expected figures are counted by the test
// from the events it generated, not by the code under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/text.h"
#include "daemon/advise_report.h"
#include "projections/advice.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::InMemory;

constexpr const char* kModel = R"(
store: {schema: advice}
entities: [author, book, post, comment, book_author]
limits: {max_document_bytes: 40000}
projections:
  authors:
    from: author
    fields:
      books: {ids: book, via: authorIds}
      linkedBooks: {count: book, through: book_author, from: author_id, to: book_id}
  books:
    from: book
    fields:
      authors: {lookup: author, by: authorIds, select: [name]}
  posts:
    from: post
    fields:
      comments: {embed: comment, via: postId, select: [text]}
)";

std::string Upsert(const std::string& type, const std::string& id, const std::string& data) {
  return R"({"type":")" + type + R"(","id":")" + id + R"(","op":"upsert","data":)" + data + "}";
}

// The data, generated once, and what the test counts from it.
struct Data {
  std::vector<std::string> events;
  std::map<std::string, uint64_t> books_of_author;  // books naming the author
  std::map<std::string, uint64_t> authors_of_book;  // authors a book names
  std::map<std::string, uint64_t> comments_of_post;
  std::map<std::string, uint64_t> linked_books_of_author;  // distinct live pairs
};

Data Generate() {
  Data d;
  std::mt19937 rng(20261127);
  for (int a = 0; a < 40; ++a) {
    d.events.push_back(Upsert("author", "a" + std::to_string(a), R"({"name":"Author )" +
                                                                     std::to_string(a) + R"("})"));
  }
  // a0 is in 1,500 books; the others in a few each.
  for (int b = 0; b < 1700; ++b) {
    std::vector<std::string> authors;
    if (b < 1500) authors.push_back("a0");
    authors.push_back("a" + std::to_string(1 + rng() % 39));
    if (rng() % 3 == 0) authors.push_back("a" + std::to_string(1 + rng() % 39));
    std::sort(authors.begin(), authors.end());
    authors.erase(std::unique(authors.begin(), authors.end()), authors.end());
    std::string ids;
    for (const std::string& a : authors) {
      ids += (ids.empty() ? "\"" : ",\"") + a + "\"";
      d.books_of_author[a]++;
    }
    const std::string book = "b" + std::to_string(b);
    d.authors_of_book[book] = authors.size();
    d.events.push_back(Upsert("book", book, R"({"authorIds":[)" + ids + "]}"));
  }
  // p0 holds 1,200 comments; p1..p9 a few.
  for (int p = 0; p < 10; ++p) d.events.push_back(Upsert("post", "p" + std::to_string(p), "{}"));
  for (int c = 0; c < 1300; ++c) {
    const std::string post = c < 1200 ? "p0" : "p" + std::to_string(1 + c % 9);
    d.comments_of_post[post]++;
    d.events.push_back(Upsert("comment", "c" + std::to_string(c),
                              R"({"postId":")" + post + R"(","text":"a comment of some length"})"));
  }
  // Link rows: a1 linked to b0..b29, twice to b0 (counted once); a2 to b1.
  for (int b = 0; b < 30; ++b) {
    d.events.push_back(Upsert("book_author", "l" + std::to_string(b),
                              R"({"author_id":"a1","book_id":"b)" + std::to_string(b) + R"("})"));
  }
  d.events.push_back(Upsert("book_author", "dup", R"({"author_id":"a1","book_id":"b0"})"));
  d.events.push_back(Upsert("book_author", "l-a2", R"({"author_id":"a2","book_id":"b1"})"));
  d.linked_books_of_author = {{"a1", 30}, {"a2", 1}};
  return d;
}

// Nearest-rank percentile and max of `counts`, counted here.
uint64_t Percentile(const std::map<std::string, uint64_t>& counts, double q) {
  std::vector<uint64_t> values;
  for (const auto& entry : counts) values.push_back(entry.second);
  std::sort(values.begin(), values.end());
  size_t rank = static_cast<size_t>(std::ceil(q * values.size()));
  return values[std::max<size_t>(rank, 1) - 1];
}

void ExpectDistribution(const std::map<std::string, uint64_t>& counts, const Distribution& got,
                        const std::string& what) {
  SCOPED_TRACE(what);
  uint64_t total = 0;
  std::string top;
  uint64_t max = 0;
  for (const auto& entry : counts) {
    total += entry.second;
    if (entry.second > max) max = entry.second, top = entry.first;
  }
  EXPECT_EQ(counts.size(), got.keys);
  EXPECT_EQ(total, got.total);
  EXPECT_EQ(Percentile(counts, 0.5), got.p50);
  EXPECT_EQ(Percentile(counts, 0.99), got.p99);
  EXPECT_EQ(max, got.max);
  ASSERT_FALSE(got.top.empty());
  EXPECT_EQ(top, got.top.front().first);
}

// The first of `items` that `matches`; a failure naming `what` if none.
template <typename T, typename Matches>
const T& Find(const std::vector<T>& items, Matches matches, const std::string& what) {
  for (const T& item : items) {
    if (matches(item)) return item;
  }
  ADD_FAILURE() << "no " << what;
  static const T none{};
  return none;
}

const FieldFanOut& Field(const ModelAdvice& advice, const std::string& projection,
                         const std::string& field) {
  return Find(
      advice.fields,
      [&](const FieldFanOut& f) { return f.projection == projection && f.field == field; },
      "field " + projection + "." + field);
}

ModelAdvice Advise(InMemory& m, double sample = 1.0) {
  AdviceOptions options;
  options.sample = sample;
  options.thresholds = m.config().limits;
  ModelAdvice advice;
  Status status = AdviseModel(m.plan(), &m.store(), options, &advice);
  EXPECT_TRUE(status.ok()) << status.message();
  return advice;
}

TEST(Advice, FanOutOfEveryFieldEqualsTheCountsOfTheGeneratedData) {
  const Data data = Generate();
  InMemory m(kModel);
  m.Apply(data.events);
  const ModelAdvice advice = Advise(m);
  // The entities that name others: books, comments, link rows (authors and
  // posts are only named).
  EXPECT_EQ(1700u + 1300u + 32u, advice.entities_read);

  const FieldFanOut& ids = Field(advice, "authors", "books");
  EXPECT_EQ("ids", ids.kind);
  EXPECT_FALSE(ids.limit.has_value());
  ExpectDistribution(data.books_of_author, ids.members_per_document, "books per author (ids)");
  ExpectDistribution(data.authors_of_book, ids.documents_per_member, "authors per book (ids)");

  const FieldFanOut& lookup = Field(advice, "books", "authors");
  EXPECT_EQ("lookup", lookup.kind);
  ExpectDistribution(data.authors_of_book, lookup.members_per_document, "authors per book");
  ExpectDistribution(data.books_of_author, lookup.documents_per_member,
                     "books one author's change rewrites");
  EXPECT_EQ("a0", lookup.documents_per_member.top.front().first);

  const FieldFanOut& embed = Field(advice, "posts", "comments");
  ExpectDistribution(data.comments_of_post, embed.members_per_document, "comments per post");

  const FieldFanOut& linked = Field(advice, "authors", "linkedBooks");
  EXPECT_EQ("book_author: author_id -> book_id", linked.relation);
  ExpectDistribution(data.linked_books_of_author, linked.members_per_document,
                     "linked books per author: a repeated pair once");
}

const IndexRowsOfType& IndexRows(const ModelAdvice& advice, const std::string& type) {
  return Find(
      advice.index_rows, [&](const IndexRowsOfType& r) { return r.entity_type == type; },
      "index rows of type " + type);
}

TEST(Advice, IndexRowsPerEntityAreTheRowsEachEntityKeeps) {
  const Data data = Generate();
  InMemory m(kModel);
  m.Apply(data.events);
  const ModelAdvice advice = Advise(m);
  // The types whose entities name others; authors and posts are only named.
  std::vector<std::string> types;
  for (const IndexRowsOfType& r : advice.index_rows) types.push_back(r.entity_type);
  EXPECT_EQ((std::vector<std::string>{"book", "book_author", "comment"}), types);

  // A book keeps a row per author it names (the ids and the lookup share
  // the relation), a comment one for its post.
  const IndexRowsOfType& books = IndexRows(advice, "book");
  EXPECT_EQ(std::vector<std::string>{"authorIds"}, books.relations);
  EXPECT_TRUE(books.linked_relations.empty());
  ExpectDistribution(data.authors_of_book, books.rows_per_entity, "index rows per book");
  std::map<std::string, uint64_t> one_per_comment;
  for (int c = 0; c < 1300; ++c) one_per_comment["c" + std::to_string(c)] = 1;
  ExpectDistribution(one_per_comment, IndexRows(advice, "comment").rows_per_entity,
                     "index rows per comment");

  // A link row keeps one row for each of its two fields, repeated pair or
  // not (no row for its pair: no field reads the pairs in a link order);
  // the pairs keep one row each, of the count.
  const IndexRowsOfType& links = IndexRows(advice, "book_author");
  EXPECT_EQ(2u, links.relations.size());
  EXPECT_EQ(std::vector<std::string>{"book through book_author from author_id to book_id"},
            links.linked_relations);
  std::map<std::string, uint64_t> two_per_link;
  for (int b = 0; b < 30; ++b) two_per_link["l" + std::to_string(b)] = 2;
  two_per_link["dup"] = two_per_link["l-a2"] = 2;
  ExpectDistribution(two_per_link, links.rows_per_entity, "index rows per link row");

  // The same figures in all three reports.
  const std::string text = FormatAdvice(advice, "advice");
  EXPECT_NE(std::string::npos, text.find("  book_author: p50 2, p99 2, max 2")) << text;
  EXPECT_NE(std::string::npos,
            text.find("1 row per linked pair: book through book_author from author_id to book_id"))
      << text;
  EXPECT_NE(std::string::npos, AdviceJson(advice, "advice").find("\"entity_type\":\"book_author\""));
  EXPECT_NE(std::string::npos, AdviceHtml(advice, "advice").find("index rows per book_author"));
}

TEST(Advice, RecommendsALimitABoundedCopyAndASmallerDocumentWithTheirFigures) {
  const Data data = Generate();
  InMemory m(kModel);
  m.Apply(data.events);
  const ModelAdvice advice = Advise(m);
  std::map<std::string, const Recommendation*> found;
  for (const Recommendation& r : advice.recommendations) found[r.rule + " " + r.where] = &r;
  ASSERT_TRUE(found.count("unbounded-members projections.authors.fields.books"));
  ASSERT_TRUE(found.count("unbounded-members projections.posts.fields.comments"));
  ASSERT_TRUE(found.count("wide-fanout projections.books.fields.authors"));
  ASSERT_TRUE(found.count("large-document projections.posts"));
  EXPECT_EQ(4u, advice.recommendations.size());
  // Each with the figure that justifies it.
  EXPECT_NE(std::string::npos,
            found["unbounded-members projections.authors.fields.books"]->finding.find(
                FormatCount(data.books_of_author.at("a0"))));
  EXPECT_NE(std::string::npos, found["wide-fanout projections.books.fields.authors"]->finding.find(
                                   "a0 rewrites " + FormatCount(data.books_of_author.at("a0"))));

  // The limit it suggests is one `check` accepts, and with it (and the
  // thresholds raised past what the model is meant to hold) nothing is left.
  const std::string& suggestion =
      found["unbounded-members projections.authors.fields.books"]->suggestion;
  const size_t at = suggestion.find("`limit: ");
  ASSERT_NE(std::string::npos, at) << suggestion;
  const std::string limit = suggestion.substr(at + 8, suggestion.find('`', at + 1) - at - 8);
  std::string fixed = kModel;
  auto replace = [&](const std::string& from, const std::string& to) {
    size_t p = fixed.find(from);
    ASSERT_NE(std::string::npos, p) << from;
    fixed.replace(p, from.size(), to);
  };
  replace("{ids: book, via: authorIds}", "{ids: book, via: authorIds, limit: " + limit + "}");
  replace("{embed: comment, via: postId, select: [text]}",
          "{embed: comment, via: postId, select: [text], limit: 10}");
  replace("limits: {max_document_bytes: 40000}", "limits: {max_document_bytes: 40000, fanout_warn: 2000}");
  InMemory good(fixed);
  good.Apply(data.events);
  const ModelAdvice after = Advise(good);
  for (const Recommendation& r : after.recommendations) {
    ADD_FAILURE() << "left: [" << r.rule << "] " << r.where << ": " << r.finding;
  }
  EXPECT_EQ(std::stoull(limit), *Field(after, "authors", "books").limit);
}

// Buckets of 10 comments with at most one page per typical group: the p50
// post (counted here) needs more, and the size suggested holds it in one.
TEST(Advice, RecommendsABucketSizeThatHoldsTheTypicalGroupInMaxPages) {
  const Data data = Generate();
  const std::string model = R"(
store: {schema: advice_buckets}
entities: [author, book, post, comment, book_author]
limits: {max_bucket_pages: 1}
projections:
  pages: {buckets: comment, by: postId, size: 10, field: comments})";
  InMemory m(model);
  m.Apply(data.events);
  const uint64_t p50 = Percentile(data.comments_of_post, 0.5);
  ASSERT_GT(p50, 10u);
  const ModelAdvice advice = Advise(m);
  ASSERT_EQ(1u, advice.recommendations.size());
  const Recommendation& r = advice.recommendations.front();
  EXPECT_EQ("bucket-size", r.rule);
  EXPECT_EQ("projections.pages", r.where);
  EXPECT_NE(std::string::npos, r.suggestion.find("`size: " + std::to_string(p50) + "`")) << r.suggestion;
  std::string fixed = model;
  fixed.replace(fixed.find("size: 10"), 8, "size: " + std::to_string(p50));
  InMemory good(fixed);
  good.Apply(data.events);
  EXPECT_TRUE(Advise(good).recommendations.empty());
}

TEST(Advice, ASampleReadsPartOfTheStoreAndEstimatesTheHotKey) {
  const Data data = Generate();
  InMemory m(kModel);
  m.Apply(data.events);
  const ModelAdvice advice = Advise(m, 0.5);
  const uint64_t referrers = 1700 + 1300 + 32;
  EXPECT_LT(advice.entities_read, referrers * 3 / 4);
  EXPECT_GT(advice.entities_read, referrers / 4);
  const Distribution& fanout = Field(advice, "books", "authors").documents_per_member;
  ASSERT_FALSE(fanout.top.empty());
  EXPECT_EQ("a0", fanout.top.front().first);
  const double truth = static_cast<double>(data.books_of_author.at("a0"));
  EXPECT_NEAR(truth, static_cast<double>(fanout.max), truth * 0.15);
}

}  // namespace
}  // namespace denormd

namespace denormd {
namespace {

// What one change costs (BatchStats::fanouts), counted for each change of a
// batch alone: a rename of a0 recomputes its author document and every book
// naming it; a rename of a1 in the same batch, its own and its books.
TEST(EventFanOut, EachChangeCountsItsOwnDocumentsAndThoseThatCopyIt) {
  const Data data = Generate();
  InMemory m(kModel);
  m.Apply(data.events);
  const BatchStats stats = m.Apply({
      R"({"type":"author","id":"a0","op":"patch","data":{"name":"Renamed"}})",
      R"({"type":"author","id":"a1","op":"patch","data":{"name":"Renamed too"}})",
      R"({"type":"comment","id":"c5","op":"patch","data":{"text":"edited"}})",
      R"({"type":"book","id":"new","op":"upsert","data":{"authorIds":["a3","a4"]}})"});
  std::map<std::string, EventFanOut> by_id;
  for (const EventFanOut& f : stats.fanouts) by_id[f.id] = f;
  ASSERT_EQ(4u, by_id.size());
  EXPECT_EQ(std::vector<std::string>{"name"}, by_id["a0"].fields);
  EXPECT_EQ(1 + data.books_of_author.at("a0"), by_id["a0"].documents);
  EXPECT_EQ(1 + data.books_of_author.at("a1"), by_id["a1"].documents);
  EXPECT_EQ(std::vector<std::string>{"text"}, by_id["c5"].fields);
  EXPECT_EQ(1u, by_id["c5"].documents);  // its post
  EXPECT_EQ(std::vector<std::string>{"(created)"}, by_id["new"].fields);
  EXPECT_EQ(3u, by_id["new"].documents);  // its own, and a3's and a4's authors documents
}

}  // namespace
}  // namespace denormd
