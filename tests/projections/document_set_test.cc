// DocumentSet: the expected-documents file (read, written, read back) and the
// comparison behind `denormd test --expect` and --batch: the JSON path of a
// document's first difference, missing and unexpected documents, counts, and
// `stable` bucket collections compared by content and invariants.
#include <gtest/gtest.h>

#include "formats/format_registry.h"
#include "projections/document_set.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

std::string Difference(const std::string& actual, const std::string& expected) {
  JsonDocument a, e;
  EXPECT_TRUE(ParseJson(actual, &a).ok()) << actual;
  EXPECT_TRUE(ParseJson(expected, &e).ok()) << expected;
  return FirstDifference(a, e);
}

TEST(FirstDifference, NamesThePathOfTheFirstDifferingValue) {
  EXPECT_EQ("", Difference(R"({"a": 1, "b": [1, 2]})", R"({"b": [1, 2.0], "a": 1})"));
  EXPECT_EQ(R"(.authors[0].name: "Ann" != "Anne")",
            Difference(R"({"authors": [{"id": "a1", "name": "Ann"}]})",
                       R"({"authors": [{"name": "Anne", "id": "a1"}]})"));
  // Keys in byte order: "a" before "b".
  EXPECT_EQ(".a: 2 != 1", Difference(R"({"a": 2, "b": 2})", R"({"a": 1, "b": 1})"));
  EXPECT_EQ(".c: missing != true", Difference(R"({"a": 1})", R"({"a": 1, "c": true})"));
  EXPECT_EQ(".c: null != missing", Difference(R"({"c": null})", R"({})"));
  EXPECT_EQ(".books[2]: missing != \"b3\"",
            Difference(R"({"books": ["b1", "b2"]})", R"({"books": ["b1", "b2", "b3"]})"));
  EXPECT_EQ(".[1]: \"y\" != missing", Difference(R"(["x", "y"])", R"(["x"])"));
  EXPECT_EQ(".x: {\"a\":1} != [1]", Difference(R"({"x": {"a": 1}})", R"({"x": [1]})"));
  EXPECT_EQ(".: 1 != 2", Difference("1", "2"));
  EXPECT_EQ(R"(.["first name"]: "a" != "b")",
            Difference(R"({"first name": "a"})", R"({"first name": "b"})"));
  EXPECT_EQ(R"(.a["9"]: 1 != 2)", Difference(R"({"a": {"9": 1}})", R"({"a": {"9": 2}})"));
  // Long values are shortened.
  const std::string long_text(500, 'x');
  const std::string line = Difference("{\"t\": \"" + long_text + "\"}", R"({"t": "y"})");
  EXPECT_LT(line.size(), 200u) << line;
  EXPECT_NE(std::string::npos, line.find("...")) << line;
}

DocumentSet Set(const std::string& json) {
  DocumentSet set;
  Status status = ParseDocumentSet(json, &set);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return set;
}

std::string Diff(const DocumentSet& actual, const DocumentSet& expected,
                 const DiffOptions& options = DiffOptions()) {
  std::string out;
  for (const std::string& line : DiffDocumentSets(actual, expected, options)) out += line + "\n";
  return out;
}

TEST(DiffDocumentSets, ListsDifferingMissingAndUnexpectedDocumentsAndCounts) {
  const DocumentSet expected = Set(R"({"collections": {
      "books": {"b1": {"id": "b1", "authors": [{"name": "Anne"}]}, "b2": {"id": "b2"}},
      "authors": {"a1": {"id": "a1"}}},
    "dead": 7, "stale": 2})");
  DocumentSet actual = expected;
  EXPECT_EQ("", Diff(actual, expected));
  actual.collections["books"]["b1"] = R"({"authors":[{"name":"Ann"}],"id":"b1"})";
  actual.collections["books"].erase("b2");
  actual.collections["books"]["b7"] = R"({"id":"b7"})";
  actual.collections["shelves"]["s1"] = R"({"id":"s1"})";
  actual.dead = 6;
  actual.stale = 3;
  EXPECT_EQ("books/b1: .authors[0].name: \"Ann\" != \"Anne\"\n"
            "books/b2: missing, expected {\"id\":\"b2\"}\n"
            "books/b7: unexpected {\"id\":\"b7\"}\n"
            "shelves/s1: unexpected {\"id\":\"s1\"}\n"
            "dead letters: 6 != 7\n"
            "stale events: 3 != 2\n",
            Diff(actual, expected));
  // Counts left out of a hand-written file are not compared.
  DocumentSet without_counts = expected;
  without_counts.dead.reset();
  without_counts.stale.reset();
  actual = expected;
  actual.dead = 100;
  EXPECT_EQ("", Diff(actual, without_counts));
}

// A stable bucket collection "pages" (by post, size 4) as a file.
std::string Pages(const std::string& docs, const std::string& layout = "stable") {
  return R"({"buckets": {"pages": {"by": "post", "field": "items", "layout": ")" + layout +
         R"(", "size": 4}}, "collections": {"pages": {)" + docs + "}}}";
}

std::string Bucket(const std::string& id, int seq, const std::vector<int>& items) {
  const std::string group = id.substr(0, id.find(':'));
  std::string out = "\"" + id + "\": {\"id\": \"" + id + "\", \"post\": \"" + group +
                    "\", \"seq\": " + std::to_string(seq) + ", \"items\": [";
  for (size_t i = 0; i < items.size(); ++i) {
    out += (i ? ", " : "") + std::string("{\"id\": \"c") + std::to_string(items[i]) + "\"}";
  }
  return out + "]}";
}

TEST(DiffDocumentSets, StableBucketsCompareTheGroupsItemsAndInvariantsNotPositions) {
  const DocumentSet packed = Set(Pages(Bucket("p:0", 0, {1, 2, 3, 4}) + ", " +
                                       Bucket("p:1", 1, {5, 6, 7}) + ", " +
                                       Bucket("q:0", 0, {9})));
  // The same members per group in seq order, in other buckets: equal.
  const DocumentSet moved = Set(Pages(Bucket("p:0", 0, {1, 2}) + ", " +
                                      Bucket("p:3", 5, {3, 4, 5}) + ", " +
                                      Bucket("p:1", 9, {6, 7}) + ", " +
                                      Bucket("q:4", 2, {9})));
  EXPECT_EQ("", Diff(moved, packed));
  EXPECT_EQ("", Diff(packed, moved));
  // ... but not bucket for bucket.
  DiffOptions positions;
  positions.bucket_positions = true;
  EXPECT_NE("", Diff(moved, packed, positions));
  // Nor in the packed layout.
  EXPECT_NE("", Diff(Set(Pages(Bucket("p:0", 0, {1, 2}) + ", " + Bucket("p:1", 1, {3, 4, 5, 6, 7}),
                               "packed")),
                     Set(Pages(Bucket("p:0", 0, {1, 2, 3, 4}) + ", " + Bucket("p:1", 1, {5, 6, 7}),
                               "packed"))));

  // Content: an item out of order, a group missing, one unexpected.
  EXPECT_EQ("pages group p: items in seq order: .[1].id: \"c3\" != \"c2\"\n"
            "pages group q: missing, expected 1 item\n"
            "pages group r: unexpected, 1 item\n",
            Diff(Set(Pages(Bucket("p:0", 0, {1, 3, 2, 4}) + ", " + Bucket("p:1", 1, {5, 6, 7}) +
                           ", " + Bucket("r:0", 0, {8}))),
                 packed));
  // Invariants, on the side that breaks them.
  EXPECT_EQ("pages/p:0: 1 item, fewer than 2 though not its group's last (by seq)\n"
            "pages/p:1: 6 items, more than size 4\n",
            Diff(Set(Pages(Bucket("p:0", 0, {1}) + ", " + Bucket("p:1", 1, {2, 3, 4, 5, 6, 7}) +
                           ", " + Bucket("q:0", 0, {9}))),
                 packed));
  EXPECT_EQ("pages/p:0: an empty bucket\n"
            "pages group p: buckets p:1 and p:2 have the same seq 1\n",
            Diff(Set(Pages(Bucket("p:0", 0, {}) + ", " + Bucket("p:1", 1, {1, 2, 3, 4}) + ", " +
                           Bucket("p:2", 1, {5, 6, 7}) + ", " + Bucket("q:0", 0, {9}))),
                 packed));
  EXPECT_EQ("pages/x: the id of a bucket of group q is q:<n>\n"
            "pages/p:9: not a bucket document (needs a string \"post\", an integer \"seq\" and "
            "a \"items\" array) (expected)\n",
            Diff(Set(Pages(Bucket("p:0", 0, {1, 2, 3, 4}) + ", " + Bucket("p:1", 1, {5, 6, 7}) +
                           R"(, "x": {"id": "x", "post": "q", "seq": 0, "items": [{"id": "c9"}]})")),
                 Set(Pages(Bucket("p:0", 0, {1, 2, 3, 4}) + ", " + Bucket("p:1", 1, {5, 6, 7}) +
                           ", " + Bucket("q:0", 0, {9}) + R"(, "p:9": {"id": "p:9"})"))));
}

TEST(DiffDocumentSets, BucketShapesMustAgreeWhereBothSidesHaveThem) {
  DocumentSet actual = Set(Pages(Bucket("p:0", 0, {1})));
  DocumentSet expected = actual;
  expected.buckets["pages"].size = 100;
  EXPECT_EQ("buckets pages: {\"by\":\"post\",\"field\":\"items\",\"layout\":\"stable\",\"size\":4}"
            " != {\"by\":\"post\",\"field\":\"items\",\"layout\":\"stable\",\"size\":100}\n",
            Diff(actual, expected));
  // A hand-written file may leave the shapes out: the actual ones apply.
  expected.buckets.clear();
  EXPECT_EQ("", Diff(actual, expected));
}

TEST(DocumentSetJson, WritesSortedIndentedJsonThatReadsBackTheSame) {
  DocumentSet set;
  set.collections["b"]["2"] = R"({"z": 1, "a": {"y": [], "x": {}}, "id": "2"})";
  set.collections["b"]["10"] = R"({"id": "10", "n": 1.5})";
  set.collections["a"];  // empty collections stay
  set.buckets["b"] = BucketShape{"post", "items", 3, false};
  set.dead = 1;
  set.stale = 0;
  const std::string json = DocumentSetJson(set);
  EXPECT_EQ(R"({
 "buckets": {
  "b": {
   "by": "post",
   "field": "items",
   "layout": "packed",
   "size": 3
  }
 },
 "collections": {
  "a": {},
  "b": {
   "10": {
    "id": "10",
    "n": 1.5
   },
   "2": {
    "a": {
     "x": {},
     "y": []
    },
    "id": "2",
    "z": 1
   }
  }
 },
 "dead": 1,
 "stale": 0
}
)",
            json);
  DocumentSet back = Set(json);
  EXPECT_EQ("", Diff(back, set));
  EXPECT_EQ(json, DocumentSetJson(back));
  EXPECT_EQ(set.buckets, back.buckets);
  EXPECT_EQ(std::optional<uint64_t>(1), back.dead);
}

TEST(DocumentSetJson, TheArticleFileReadsAndWritesBackToItsOwnBytes) {
  // tests/data/article/expected.json was written by Python's json.dump(...,
  // indent=1, sort_keys=True), without the final newline.
  const std::string text = testing::ReadFile(testing::SourcePath("tests/data/article/expected.json"));
  EXPECT_EQ(text + "\n", DocumentSetJson(Set(text)));
}

TEST(ParseDocumentSet, SaysWhatIsWrong) {
  auto error = [](const std::string& json) {
    DocumentSet set;
    Status status = ParseDocumentSet(json, &set);
    EXPECT_FALSE(status.ok()) << json;
    return status.message();
  };
  EXPECT_NE(std::string::npos, error("{").find("not valid JSON"));
  EXPECT_NE(std::string::npos, error("[]").find("one JSON object"));
  EXPECT_EQ("no \"collections\"", error(R"({"dead": 1})"));
  EXPECT_EQ("unknown key \"colections\" (expected collections, buckets, dead, stale)",
            error(R"({"colections": {}})"));
  EXPECT_EQ("collections.books.b1: a document must be a JSON object",
            error(R"({"collections": {"books": {"b1": [1]}}})"));
  EXPECT_EQ("dead: not a whole number >= 0", error(R"({"collections": {}, "dead": -1})"));
  EXPECT_NE(std::string::npos,
            error(R"({"collections": {}, "buckets": {"p": {"by": "x", "field": "items", "layout": "tidy", "size": 2}}})")
                .find("buckets.p: a bucket collection is"));
}

TEST(EmptyDocumentSet, HoldsEveryCollectionAndTheBucketShapesOfTheConfig) {
  std::vector<ConfigError> errors;
  std::optional<Config> config = LoadConfig(testing::SourcePath("tests/data/article/config.yaml"), &errors);
  ASSERT_TRUE(config.has_value());
  const DocumentSet set = EmptyDocumentSet(*config);
  EXPECT_EQ(9u, set.collections.size());
  EXPECT_EQ(1u, set.collections.count("catalog"));
  ASSERT_EQ(1u, set.buckets.size());
  EXPECT_EQ((BucketShape{"postId", "comments", 100, true}), set.buckets.at("post_comments"));
  EXPECT_FALSE(set.dead.has_value());
}

}  // namespace
}  // namespace denormd
