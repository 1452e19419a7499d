// ReferenceIndex::WriteRows on both stores: a row added that exists, or
// removed that does not, changes nothing and moves no counter, and the rows
// that did change are returned. The reconciliation of the rows kept through
// a link (projections/linked_rows.cc) writes without reading the stored rows
// first and takes which pairs joined or left from that answer; the ids lists
// it splices would be wrong (and read again) if a row were reported that did
// not change.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/engine.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

const char* const kConfig = R"(store: {schema: write_rows}
entities: [author, book]
projections:
  authors:
    from: author
    fields:
      countOfBooks: {count: book, via: authorIds}
)";

const Relation& AuthorIds(const ProjectionPlan& plan) {
  for (const auto& relation : plan.relations()) {
    if (relation->entity_type() == "book") return *relation;
  }
  ADD_FAILURE() << "no relation of type book";
  return *plan.relations().front();
}

// The rows WriteRows returned, as "+target id" / "-target id", sorted.
std::vector<std::string> Named(const std::vector<ReferenceIndex::WrittenRow>& written,
                               const Relation& relation) {
  std::vector<std::string> out;
  for (const ReferenceIndex::WrittenRow& row : written) {
    EXPECT_EQ(&relation, row.relation);
    out.push_back((row.added ? "+" : "-") + row.target + " " + row.id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Writes `added` and `removed` (targets) as rows of book `book`, commits,
// and returns what WriteRows said changed.
std::vector<std::string> Write(Store& store, const Relation& relation, const std::string& book,
                               const std::vector<std::string>& added,
                               const std::vector<std::string>& removed) {
  ReferenceIndex::OwnedRows rows;
  rows.owner = {"book", book};
  for (const std::string& target : added) rows.added.push_back({&relation, target, ""});
  for (const std::string& target : removed) rows.removed.push_back({&relation, target, ""});
  std::unique_ptr<StoreTransaction> txn;
  EXPECT_TRUE(store.Begin(&txn).ok());
  std::vector<ReferenceIndex::WrittenRow> written;
  Status status = txn->index().WriteRows({rows}, &written);
  EXPECT_TRUE(status.ok()) << status.ToString();
  status = txn->Commit();
  EXPECT_TRUE(status.ok()) << status.ToString();
  return Named(written, relation);
}

// The counters of `targets`, as "target=count".
std::vector<std::string> Counts(Store& store, const Relation& relation,
                                const std::vector<std::string>& targets) {
  std::vector<IndexRange> ranges;
  for (const std::string& target : targets) ranges.push_back({target, std::nullopt, false, 0});
  std::unique_ptr<StoreTransaction> txn;
  EXPECT_TRUE(store.Begin(&txn).ok());
  std::map<std::string, uint64_t> counts;
  const Status status = txn->index().Count(relation, ranges, &counts);
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_TRUE(txn->Commit().ok());
  std::vector<std::string> out;
  for (const auto& entry : counts) out.push_back(entry.first + "=" + std::to_string(entry.second));
  return out;
}

void ExpectOnlyChangesAreWrittenAndCounted(Store& store, const Relation& relation) {
  using Rows = std::vector<std::string>;
  EXPECT_EQ((Rows{"+a1 b1", "+a2 b1"}), Write(store, relation, "b1", {"a1", "a2"}, {}));
  // a1 exists (added again: nothing), a3 is new, a2 exists (removed), a4
  // does not (removed: nothing).
  EXPECT_EQ((Rows{"+a3 b1", "-a2 b1"}), Write(store, relation, "b1", {"a1", "a3"}, {"a2", "a4"}));
  EXPECT_EQ((Rows{"a1=1", "a2=0", "a3=1", "a4=0"}),
            Counts(store, relation, {"a1", "a2", "a3", "a4"}));
  // Nothing to change: nothing returned, and the counters stay.
  EXPECT_EQ(Rows{}, Write(store, relation, "b1", {"a1", "a3"}, {"a2", "a4"}));
  EXPECT_EQ((Rows{"a1=1", "a2=0", "a3=1", "a4=0"}),
            Counts(store, relation, {"a1", "a2", "a3", "a4"}));
  // Another owner under the same target is a row of its own.
  EXPECT_EQ((Rows{"+a1 b2"}), Write(store, relation, "b2", {"a1"}, {"a2"}));
  EXPECT_EQ((Rows{"a1=2"}), Counts(store, relation, {"a1"}));
}

TEST(WriteRows, InMemoryReturnsAndCountsOnlyTheRowsThatChanged) {
  testing::InMemory memory(kConfig);
  ExpectOnlyChangesAreWrittenAndCounted(memory.store(), AuthorIds(memory.plan()));
}

TEST(WriteRows, OnPostgresReturnsAndCountsOnlyTheRowsThatChanged) {
  Engine engine(testing::ConfigOnTestDatabase(kConfig), testing::TestPostgresUrl());
  ASSERT_TRUE(engine.store.Open().ok());
  ExpectOnlyChangesAreWrittenAndCounted(engine.store, AuthorIds(engine.plan));
}

}  // namespace
}  // namespace denormd
