// The Debezium decoder on the records a real Debezium captured
// (tests/data/debezium/README.md), with and without the JsonConverter schema
// wrapper; then the decoded events applied by the in-memory engine, which
// must give the documents of the application's final rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "formats/debezium_format.h"
#include "formats/input_decoder.h"
#include "projections/json.h"
#include "projections/maintenance.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::SourcePath;

const char kSchemasFile[] = "tests/data/debezium/records-schemas.jsonl";
const char kNoSchemasFile[] = "tests/data/debezium/records-noschemas.jsonl";

std::string AppConfigYaml() {
  return testing::ReadFile(SourcePath("tests/data/debezium/config.yaml"));
}

// The captured records as the Kafka source delivers them.
std::vector<RawRecord> LoadRecords(const char* relative) {
  std::vector<RawRecord> records;
  std::ifstream in(SourcePath(relative));
  std::string line;
  while (std::getline(in, line)) {
    JsonDocument doc;
    EXPECT_TRUE(ParseJson(line, &doc).ok()) << line;
    RawRecord record;
    record.topic = doc["topic"].GetString();
    record.at = {"kafka:denormd-app:" + record.topic, doc["partition"].GetInt(),
                 doc["offset"].GetInt64()};
    if (!doc["key"].IsNull()) record.key = ToJson(doc["key"]);
    if (!doc["value"].IsNull()) record.value = ToJson(doc["value"]);
    records.push_back(std::move(record));
  }
  EXPECT_EQ(37u, records.size()) << relative;
  return records;
}

// What one record decoded to, in a form tests compare.
struct Decoded {
  std::string kind;  // "upsert", "delete", "skipped" or "dead"
  std::string type, id;
  uint64_t version = 0;
  std::string data;    // canonical JSON of an upsert's data
  std::string reason;  // of a dead letter
};

Decoded DecodeOne(const Decoder& decoder, const RawRecord& record) {
  std::vector<EntityEvent> events;
  bool skipped = false;
  Decoded out;
  Status status = decoder.Decode(record, &events, &skipped);
  if (!status.ok()) {
    EXPECT_TRUE(status.IsInvalidInput()) << status.ToString();
    out.kind = "dead";
    out.reason = status.message();
    return out;
  }
  if (skipped) {
    EXPECT_TRUE(events.empty());
    out.kind = "skipped";
    return out;
  }
  EXPECT_EQ(1u, events.size());
  if (events.empty()) return out;
  const EntityEvent& event = events[0];
  out.kind = event.op == EventOp::kDelete ? "delete" : "upsert";
  EXPECT_NE(EventOp::kPatch, event.op);
  out.type = event.key.type;
  out.id = event.key.id;
  out.version = event.version.value_or(0);
  if (event.data) out.data = CanonicalJson(*event.data);
  return out;
}

// Every record of the captured run, as tests/data/debezium/README.md lists
// them: topic (after "app.public."), offset, what it must decode to.
struct Expectation {
  const char* table;
  int64_t offset;
  const char* kind;
  const char* type;
  const char* id;
  uint64_t version;
};
const Expectation kExpected[] = {
    {"authors", 0, "upsert", "author", "a1", 26471960},
    {"authors", 1, "upsert", "author", "a2", 26471960},
    {"authors", 2, "upsert", "author", "a3", 26472000},
    {"authors", 3, "upsert", "author", "a1", 26473240},
    {"authors", 4, "upsert", "author", "a2", 26473496},
    {"authors", 5, "delete", "author", "a2", 26475232},
    {"authors", 6, "skipped", "", "", 0},
    {"book_authors", 0, "upsert", "book_author", "b1:a1", 26471960},
    {"book_authors", 1, "upsert", "book_author", "b1:a2", 26471960},
    {"book_authors", 2, "upsert", "book_author", "b2:a1", 26471960},
    {"book_authors", 3, "upsert", "book_author", "b3:a3", 26472432},
    {"book_authors", 4, "delete", "book_author", "b1:a2", 26472880},
    {"book_authors", 5, "skipped", "", "", 0},
    {"book_authors", 6, "upsert", "book_author", "b1:a3", 26472952},
    {"book_authors", 7, "delete", "book_author", "b2:a1", 26475048},
    {"book_authors", 8, "skipped", "", "", 0},
    {"books", 0, "upsert", "book", "b1", 26471960},
    {"books", 1, "upsert", "book", "b2", 26471960},
    {"books", 2, "upsert", "book", "b3", 26472248},
    {"books", 3, "upsert", "book", "b1", 26472720},
    {"books", 4, "delete", "book", "b2", 26475120},
    {"books", 5, "skipped", "", "", 0},
    {"comments", 0, "upsert", "comment", "c1", 26471960},
    {"comments", 1, "upsert", "comment", "c2", 26471960},
    {"comments", 2, "upsert", "comment", "c3", 26473744},
    {"comments", 3, "upsert", "comment", "c4", 26473904},
    {"comments", 4, "upsert", "comment", "c5", 26474064},
    {"comments", 5, "upsert", "comment", "c2", 26474328},
    {"comments", 6, "delete", "comment", "c1", 26474496},
    {"comments", 7, "skipped", "", "", 0},
    {"comments", 8, "delete", "comment", "c2", 26474608},
    {"comments", 9, "skipped", "", "", 0},
    {"comments", 10, "upsert", "comment", "c2b", 26474608},
    {"comments", 11, "dead", "", "", 0},
    {"comments", 12, "upsert", "comment", "c6", 26478696},
    {"posts", 0, "upsert", "post", "p1", 26471960},
    {"posts", 1, "upsert", "post", "p1", 26474848},
};

class DebeziumFixtureTest : public ::testing::TestWithParam<const char*> {
 protected:
  testing::InMemory memory_{AppConfigYaml()};
  InputDecoder decoder_{memory_.config()};
};

TEST_P(DebeziumFixtureTest, EveryRecordDecodesAsTheCapturedRunSays) {
  const std::vector<RawRecord> records = LoadRecords(GetParam());
  ASSERT_EQ(std::size(kExpected), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const Expectation& want = kExpected[i];
    const RawRecord& record = records[i];
    SCOPED_TRACE(record.topic + " offset " + std::to_string(record.at.position));
    ASSERT_EQ(std::string("app.public.") + want.table, record.topic);
    ASSERT_EQ(want.offset, record.at.position);
    const Decoded got = DecodeOne(decoder_, record);
    EXPECT_EQ(want.kind, got.kind) << got.reason;
    EXPECT_EQ(want.type, got.type);
    EXPECT_EQ(want.id, got.id);
    EXPECT_EQ(want.version, got.version);
    if (got.kind == "upsert" || got.kind == "delete") {
      std::vector<EntityEvent> events;
      bool skipped;
      ASSERT_TRUE(decoder_.Decode(record, &events, &skipped).ok());
      EXPECT_TRUE(events.at(0).version.has_value());  // every change has one
    }
    if (got.kind == "dead") {  // the truncate: says what happened and what to do
      EXPECT_NE(std::string::npos, got.reason.find("TRUNCATE of public.comments at lsn 26478280"))
          << got.reason;
      EXPECT_NE(std::string::npos, got.reason.find("native delete at version 26478280 for every "
                                                    "stored comment entity"))
          << got.reason;
    }
  }
}

TEST_P(DebeziumFixtureTest, ColumnsKeepTheirEncodingAndJsonbIsDecoded) {
  std::map<std::string, std::string> last_data;  // "type/id" -> data of its last upsert
  for (const RawRecord& record : LoadRecords(GetParam())) {
    const Decoded got = DecodeOne(decoder_, record);
    if (got.kind == "upsert") last_data[got.type + "/" + got.id] = got.data;
  }
  // jsonb (json_columns: [images]) arrives as a string and is decoded.
  EXPECT_EQ(
      R"({"first_name":"William","id":"a2","images":[{"thumbnail":"https://img.example/a2-t2.png"},)"
      R"({"large":"https://img.example/a2-l.png"}],"last_name":"Wakefield"})",
      last_data["author/a2"]);
  // numeric as a string with its scale, date as days since 1970.
  EXPECT_EQ(R"({"id":"b1","name":"Azure Cosmos DB 101","price":"21.00","pub_id":"mspress",)"
            R"("published_on":17287})",
            last_data["book/b1"]);
  // timestamp without time zone as microseconds since 1970.
  EXPECT_NE(std::string::npos, last_data["post/p1"].find(R"("edited_at":1706933106000000)"));
  // timestamptz in UTC with 6 fractional digits; the primary-key update's new row.
  EXPECT_EQ(R"({"author":"jane","comment":"comment number 2, edited",)"
            R"("created_at":"2024-01-02T02:04:06.250000Z","id":"c2b","post_id":"p1"})",
            last_data["comment/c2b"]);
  // Without json_columns the same column stays a string.
  EXPECT_NE(std::string::npos, last_data["book_author/b1:a3"].find(R"("position":2)"));
}

TEST_P(DebeziumFixtureTest, VersionsIncreasePerEntityAndTheSnapshotIsOlderThanEveryChange) {
  std::map<std::string, uint64_t> last_version;
  uint64_t snapshot_lsn = 0, first_streamed = UINT64_MAX;
  const std::vector<RawRecord> records = LoadRecords(GetParam());
  for (size_t i = 0; i < records.size(); ++i) {
    const Decoded got = DecodeOne(decoder_, records[i]);
    if (got.kind != "upsert" && got.kind != "delete") continue;
    const std::string entity = got.type + "/" + got.id;
    auto it = last_version.find(entity);
    if (it != last_version.end()) {
      EXPECT_GT(got.version, it->second) << entity;
    }
    last_version[entity] = got.version;
    if (records[i].value->find(R"("op":"r")") != std::string::npos) {
      if (snapshot_lsn != 0) {
        EXPECT_EQ(snapshot_lsn, got.version);
      }
      snapshot_lsn = got.version;
    } else {
      first_streamed = std::min(first_streamed, got.version);
    }
  }
  EXPECT_GT(snapshot_lsn, 0u);
  EXPECT_LT(snapshot_lsn, first_streamed);
}

INSTANTIATE_TEST_SUITE_P(Files, DebeziumFixtureTest,
                         ::testing::Values(kSchemasFile, kNoSchemasFile),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param).find("noschemas") != std::string::npos
                                      ? "NoSchemas"
                                      : "Schemas";
                         });

TEST(DebeziumFormat, SchemasAndNoSchemasDecodeIdentically) {
  testing::InMemory memory(AppConfigYaml());
  InputDecoder decoder(memory.config());
  const std::vector<RawRecord> with = LoadRecords(kSchemasFile);
  const std::vector<RawRecord> without = LoadRecords(kNoSchemasFile);
  ASSERT_EQ(with.size(), without.size());
  for (size_t i = 0; i < with.size(); ++i) {
    SCOPED_TRACE(with[i].topic + " offset " + std::to_string(with[i].at.position));
    const Decoded a = DecodeOne(decoder, with[i]);
    const Decoded b = DecodeOne(decoder, without[i]);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.type, b.type);
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.version, b.version);
    EXPECT_EQ(a.data, b.data);
    EXPECT_EQ(a.reason, b.reason);
  }
}

// ---------------------------------------------------------------------------
// The engine on the decoded events.

// What the truncate's dead letter asks the operator to do: a native delete
// at the truncate's lsn for every stored comment. Those the truncate removed
// go; c6, inserted after it (a greater version), stays: the delete is stale.
const std::vector<std::string> kTruncateResync = {
    R"({"type":"comment","id":"c2b","op":"delete","version":26478280})",
    R"({"type":"comment","id":"c3","op":"delete","version":26478280})",
    R"({"type":"comment","id":"c4","op":"delete","version":26478280})",
    R"({"type":"comment","id":"c5","op":"delete","version":26478280})",
    R"({"type":"comment","id":"c6","op":"delete","version":26478280})",
};

Collections CollectionsOf(const MemoryState& state) {
  Collections out;
  for (const auto& collection : state.collections) {
    for (const auto& doc : collection.second) out[collection.first][doc.second.id] = doc.second.json;
  }
  return out;
}

// Applies `records` in batches of `batch_size` through the decoder.
BatchStats ApplyRecords(testing::InMemory* memory, const Decoder& decoder,
                        const std::vector<RawRecord>& records, size_t batch_size) {
  BatchStats total;
  for (size_t start = 0; start < records.size(); start += batch_size) {
    const std::vector<RawRecord> batch(
        records.begin() + start, records.begin() + std::min(records.size(), start + batch_size));
    BatchStats stats;
    Status status = memory->applier().Apply(&memory->store(), DecodeBatch(decoder, batch), &stats);
    EXPECT_TRUE(status.ok()) << status.ToString();
    total.Add(stats);
  }
  return total;
}

struct EngineCase {
  const char* file;
  size_t batch_size;
};

class DebeziumEngineTest : public ::testing::TestWithParam<EngineCase> {};

TEST_P(DebeziumEngineTest, DocumentsEqualTheApplicationsFinalRows) {
  testing::InMemory memory(AppConfigYaml());
  InputDecoder decoder(memory.config());
  const std::vector<RawRecord> records = LoadRecords(GetParam().file);
  const BatchStats stats = ApplyRecords(&memory, decoder, records, GetParam().batch_size);
  EXPECT_EQ(37u, stats.events);
  EXPECT_EQ(6u, stats.skipped);        // the tombstones
  EXPECT_EQ(1u, stats.dead_letters);   // the truncate
  EXPECT_EQ(0u, stats.stale);
  ASSERT_EQ(1u, memory.store().state().dead_letters.size());
  const DeadLetter& truncate = memory.store().state().dead_letters[0];
  EXPECT_EQ(11, truncate.at.position);
  EXPECT_NE(std::string::npos, truncate.reason.find("TRUNCATE")) << truncate.reason;

  // Before the resync the truncated comments are still there: the newest
  // three of c2b, c3, c4, c5, c6.
  const std::string post = memory.Documents("posts")["p1"].json;
  EXPECT_NE(std::string::npos, post.find(R"("recentComments":[{"id":"c6")")) << post;
  EXPECT_NE(std::string::npos, post.find(R"({"id":"c5")")) << post;

  const BatchStats resync = memory.Apply(kTruncateResync);
  EXPECT_EQ(4u, resync.applied);
  EXPECT_EQ(1u, resync.stale);  // c6
  EXPECT_EQ("", testing::DiffCollections(CollectionsOf(memory.store().state()),
                                         SourcePath("tests/data/debezium/expected.json")));
  EXPECT_TRUE(memory.Differences().empty());
}

TEST_P(DebeziumEngineTest, RedeliveryAndAnyOrderChangeNothing) {
  testing::InMemory memory(AppConfigYaml());
  InputDecoder decoder(memory.config());
  std::vector<RawRecord> records = LoadRecords(GetParam().file);
  ApplyRecords(&memory, decoder, records, GetParam().batch_size);
  memory.Apply(kTruncateResync);
  const Collections once = CollectionsOf(memory.store().state());

  // Kafka Connect's at-least-once delivery: everything again, all stale.
  const BatchStats again = ApplyRecords(&memory, decoder, records, GetParam().batch_size);
  EXPECT_EQ(0u, again.applied);
  EXPECT_EQ(30u, again.stale);  // every record but 6 tombstones and the truncate
  EXPECT_EQ(once, CollectionsOf(memory.store().state()));

  // Another engine given the records shuffled (a newer event first, an older
  // one later): the newest version of each row wins all the same (stable
  // buckets may sit elsewhere: compared by content and invariants).
  testing::InMemory shuffled(AppConfigYaml());
  InputDecoder shuffled_decoder(shuffled.config());
  std::mt19937 random(7);
  std::shuffle(records.begin(), records.end(), random);
  ApplyRecords(&shuffled, shuffled_decoder, records, GetParam().batch_size);
  shuffled.Apply(kTruncateResync);
  EXPECT_EQ("", testing::DiffCollections(CollectionsOf(shuffled.store().state()),
                                         SourcePath("tests/data/debezium/expected.json")));
  EXPECT_TRUE(shuffled.Differences().empty());
}

INSTANTIATE_TEST_SUITE_P(
    FilesAndBatchSizes, DebeziumEngineTest,
    ::testing::Values(EngineCase{kSchemasFile, 1}, EngineCase{kSchemasFile, 5000},
                      EngineCase{kNoSchemasFile, 1}, EngineCase{kNoSchemasFile, 7},
                      EngineCase{kNoSchemasFile, 5000}),
    [](const ::testing::TestParamInfo<EngineCase>& info) {
      return std::string(std::string(info.param.file).find("noschemas") != std::string::npos
                             ? "NoSchemas"
                             : "Schemas") +
             "Batch" + std::to_string(info.param.batch_size);
    });

// ---------------------------------------------------------------------------
// Bad records: dead letters whose reason names what and where.

RawRecord Record(const std::string& topic, std::optional<std::string> key,
                 std::optional<std::string> value) {
  RawRecord record;
  record.topic = topic;
  record.at = {"kafka:g:" + topic, 0, 1};
  record.key = std::move(key);
  record.value = std::move(value);
  return record;
}

const char kBadConfig[] = R"(
source:
  kafka:
    brokers: b:9092
    group: g
    topics:
      - {topic: app.public.authors, format: debezium, entity: author, json_columns: [images]}
      - {topic: app.public.links, format: debezium, entity: link, id_columns: [a, b]}
      - {topic: '^other\.public\..*', format: debezium}
      - native.events
store: {schema: s}
entities: [author, link, widgets]
projections:
  authors: {from: author}
)";

std::string Envelope(const std::string& op, const std::string& after,
                     const std::string& source = R"({"lsn": 100, "schema": "public", "table": "t"})") {
  return R"({"before": null, "after": )" + after + R"(, "source": )" + source + R"(, "op": ")" + op +
         R"("})";
}

TEST(DebeziumFormat, MalformedRecordsBecomeDeadLettersWithAReason) {
  testing::InMemory memory(kBadConfig);
  InputDecoder decoder(memory.config());
  const std::string authors = "app.public.authors";
  const std::string key = R"({"id": "a1"})";
  struct Case {
    RawRecord record;
    const char* reason;  // a part of the expected reason
  };
  const std::vector<Case> cases = {
      {Record(authors, key, "not json"), "JSON"},
      {Record(authors, key, "[1, 2]"), "must be a JSON object, found an array"},
      {Record(authors, key, R"({"schema": {}, "payload": 7})"), "found a number"},
      {Record(authors, key, R"({"after": {}, "source": {"lsn": 1}})"), "has no \"op\""},
      {Record(authors, key, R"({"op": 1, "source": {"lsn": 1}})"), "\"op\" must be a string"},
      {Record(authors, key, Envelope("x", "{}")), "unknown op \"x\""},
      {Record(authors, key, R"({"op": "c", "after": {"id": "a1"}})"), "\"source\" must be an object"},
      {Record(authors, key, Envelope("c", R"({"id": "a1"})", R"({"lsn": "12"})")),
       "\"source.lsn\" must be an unsigned 64-bit integer"},
      {Record(authors, key, Envelope("c", R"({"id": "a1"})", R"({"lsn": -1})")),
       "\"source.lsn\""},
      {Record(authors, key, Envelope("c", "null")), "op \"c\" needs an object in \"after\", found null"},
      {Record(authors, key, Envelope("u", "[]")), "found an array"},
      {Record(authors, std::nullopt, Envelope("c", R"({"id": "a1"})")), "no key columns"},
      {Record(authors, "{oops", Envelope("c", R"({"id": "a1"})")), "the record key"},
      {Record(authors, "\"a1\"", Envelope("c", R"({"id": "a1"})")), "the record key must be a JSON object"},
      {Record(authors, R"({"id": 1.5})", Envelope("c", R"({"id": 1.5})")),
       "key column \"id\" must be a string, an integer or a boolean"},
      {Record(authors, R"({"id": null})", Envelope("c", R"({"id": null})")), "found null"},
      {Record(authors, R"({"id": ""})", Envelope("c", R"({"id": ""})")), "empty"},
      {Record(authors, R"({"id": ")" + std::string(600, 'x') + R"("})", Envelope("c", "{}")),
       "bytes long"},
      {Record(authors, key, Envelope("c", R"({"id": "a1", "images": "[1, "})")),
       "column \"images\" (json_columns) does not hold JSON"},
      {Record(authors, key, Envelope("c", R"({"id": "a1", "images": 3})")),
       "column \"images\" (json_columns) must hold a string of JSON, found a number"},
      {Record("app.public.links", R"({"a": "x"})", Envelope("c", R"({"a": "x"})")),
       "id column \"b\" is neither in the record key nor in \"after\""},
      {Record("other.public.gadgets", key, Envelope("c", R"({"id": "a1"})")),
       "topic \"other.public.gadgets\" maps to the entity type \"gadgets\", which is not in entities"},
      {Record(authors, key, Envelope("c", R"({"id": "a1", "id": "a2"})")), "duplicate key"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.record.value.value_or("(null)"));
    const Decoded got = DecodeOne(decoder, c.record);
    EXPECT_EQ("dead", got.kind);
    EXPECT_NE(std::string::npos, got.reason.find(c.reason)) << got.reason;
  }
}

TEST(DebeziumFormat, KeysIdsAndTopicRouting) {
  testing::InMemory memory(kBadConfig);
  InputDecoder decoder(memory.config());
  // Composite key: id columns in the configured order, ':' and '\' escaped.
  Decoded got = DecodeOne(decoder, Record("app.public.links", R"({"b": "y:1", "a": "x\\"})",
                                          Envelope("c", R"({"a": "x\\", "b": "y:1"})")));
  EXPECT_EQ("upsert", got.kind) << got.reason;
  EXPECT_EQ("link", got.type);
  EXPECT_EQ(R"(x\\:y\:1)", got.id);
  // An id column missing from the key is read from the row; integers and
  // booleans make ids too.
  got = DecodeOne(decoder, Record("app.public.links", R"({"a": 7})",
                                  Envelope("c", R"({"a": 7, "b": true})")));
  EXPECT_EQ("7:true", got.id) << got.reason;
  // A delete reads the key only; `before` may be null.
  got = DecodeOne(decoder, Record("app.public.authors", R"({"id": "a9"})",
                                  R"({"before": null, "after": null, "source": {"lsn": 5}, "op": "d"})"));
  EXPECT_EQ("delete", got.kind) << got.reason;
  EXPECT_EQ("a9", got.id);
  EXPECT_EQ(5u, got.version);
  // A pattern topic's entity type is its table name.
  got = DecodeOne(decoder, Record("other.public.widgets", R"({"id": "w1"})",
                                  Envelope("r", R"({"id": "w1"})")));
  EXPECT_EQ("widgets", got.type) << got.reason;
  // A tombstone, wrapped or not, is skipped.
  EXPECT_EQ("skipped", DecodeOne(decoder, Record("app.public.authors", R"({"id": "a1"})",
                                                 std::nullopt)).kind);
  EXPECT_EQ("skipped", DecodeOne(decoder, Record("app.public.authors", R"({"id": "a1"})",
                                                 R"({"schema": null, "payload": null})")).kind);
  // Native topics, topics no entry names and event logs use the native format.
  const std::string native = R"({"type": "author", "id": "n1", "op": "upsert", "data": {}})";
  EXPECT_EQ("n1", DecodeOne(decoder, Record("native.events", std::nullopt, native)).id);
  EXPECT_EQ("n1", DecodeOne(decoder, Record("", std::nullopt, native)).id);
  EXPECT_EQ("dead", DecodeOne(decoder, Record("native.events", std::nullopt, std::nullopt)).kind);
}

TEST(DebeziumFormat, JoinIdParts) {
  EXPECT_EQ("a:b", JoinIdParts({"a:b"}));  // one column: as it is
  EXPECT_EQ("a\\:b:c", JoinIdParts({"a:b", "c"}));
  EXPECT_EQ("a\\\\:", JoinIdParts({"a\\", ""}));
}

// An UPDATE that leaves a TOASTed column unchanged reaches Debezium without
// it (the table's default replica identity), and the connector writes its
// placeholder instead: text and jsonb as the string, bytea in base64, an
// array as an array of the string. Each such column keeps its stored value;
// with no stored row to take it from, the update is a dead letter.
constexpr const char kToastConfig[] = R"(
source:
  kafka:
    brokers: b:9092
    group: g
    topics:
      - {topic: app.public.authors, format: debezium, entity: author, json_columns: [profile]}
store: {schema: toast}
entities: [author]
projections:
  authors:
    from: author
    fields:
      name: last_name
      bio: bio
      profile: profile
      avatar: avatar
      tags: tags
)";

TEST(DebeziumFormat, UnchangedToastedColumnsKeepTheirStoredValues) {
  testing::InMemory memory(kToastConfig);
  InputDecoder decoder(memory.config());
  const std::string bio(10000, 'b');
  const std::string profile = R"({\"about\": \")" + std::string(10000, 'p') + R"(\"})";
  auto row = [&](const std::string& id, const std::string& last_name, bool unavailable) {
    if (unavailable) {
      return R"({"id": ")" + id + R"(", "last_name": ")" + last_name +
             R"(", "bio": "__debezium_unavailable_value",)"
             R"( "profile": "__debezium_unavailable_value",)"
             R"( "avatar": "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==",)"
             R"( "tags": ["__debezium_unavailable_value"]})";
    }
    return R"({"id": ")" + id + R"(", "last_name": ")" + last_name + R"(", "bio": ")" + bio +
           R"(", "profile": ")" + profile + R"(", "avatar": "AAEC", "tags": ["x", "y"]})";
  };
  auto record = [&](const std::string& id, const std::string& op, const std::string& after,
                    uint64_t lsn) {
    RawRecord r = Record("app.public.authors", R"({"id": ")" + id + R"("})",
                         Envelope(op, after, R"({"lsn": )" + std::to_string(lsn) + "}"));
    r.at.position = static_cast<int64_t>(lsn);  // each record its own offset
    return r;
  };
  BatchStats stats = ApplyRecords(&memory, decoder, {record("a1", "c", row("a1", "Old", false), 10)}, 1);
  ASSERT_EQ(1u, stats.applied);
  const std::string before = memory.Documents("authors").at("a1").json;
  stats = ApplyRecords(&memory, decoder,
                       {record("a1", "u", row("a1", "New", true), 20),
                        record("a2", "u", row("a2", "Nobody", true), 21)},
                       2);
  EXPECT_EQ(1u, stats.applied);
  EXPECT_EQ(1u, stats.dead_letters);
  const std::string after = memory.Documents("authors").at("a1").json;
  EXPECT_NE(std::string::npos, after.find(R"("name":"New")")) << after.substr(0, 80);
  // Everything else as it was, in the same places.
  std::string expected = before;
  for (const std::string field : {R"("last_name":"Old")", R"("name":"Old")"}) {
    const size_t at = expected.find(field);
    ASSERT_NE(std::string::npos, at) << field;
    expected.replace(at + field.size() - 4, 3, "New");
  }
  EXPECT_TRUE(expected == after) << after.substr(0, 60) << " ... " << after.substr(after.size() - 60);
  EXPECT_EQ(std::string::npos, after.find("unavailable"));
  // The update of a row denormd never saw is refused with the reason.
  ASSERT_EQ(1u, memory.store().state().dead_letters.size());
  const std::string reason = memory.store().state().dead_letters[0].reason;
  EXPECT_NE(std::string::npos, reason.find("did not send the unchanged value of \"bio\"")) << reason;
  EXPECT_NE(std::string::npos, reason.find("no stored author a2")) << reason;
  EXPECT_EQ(0u, memory.Documents("authors").count("a2"));
  // A later update that sends every value stores them as sent.
  stats = ApplyRecords(&memory, decoder, {record("a1", "u", row("a1", "New", false), 30)}, 1);
  EXPECT_EQ(1u, stats.applied);
  EXPECT_TRUE(expected == memory.Documents("authors").at("a1").json);
  EXPECT_TRUE(memory.Differences().empty());
}

}  // namespace
}  // namespace denormd
