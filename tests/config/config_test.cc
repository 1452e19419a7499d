// Tests of config/: the article configuration, the path and template syntax,
// {value: ...} literals, and one test per class of configuration error.
#include "config/config.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "formats/format_registry.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

// Whether `text` contains `part`, with both in the failure message.
::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" lacks \"" << part << "\"";
}

// A valid head for small configs: the projections written after it start on
// line 4.
constexpr char kHead[] = R"(store: {schema: lib}
entities: [author, book, comment]
projections:
)";

std::string Dump(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const ConfigError& e : errors) out += "  " + e.ToString("t.yaml") + "\n";
  return out;
}

// Parses `yaml`, expecting success.
Config MustParse(const std::string& yaml) {
  std::vector<ConfigError> errors;
  std::optional<Config> config = ParseConfig(yaml, "t.yaml", &errors);
  EXPECT_TRUE(config.has_value()) << Dump(errors);
  EXPECT_TRUE(errors.empty()) << Dump(errors);
  return config.value_or(Config{});
}

// Parses `yaml`, expecting failure; returns the errors.
std::vector<ConfigError> MustFail(const std::string& yaml) {
  std::vector<ConfigError> errors;
  std::optional<Config> config = ParseConfig(yaml, "t.yaml", &errors);
  EXPECT_FALSE(config.has_value());
  EXPECT_FALSE(errors.empty());
  return errors;
}

// Expects exactly one error, whose message contains `text`, at `line`, with
// `where`; returns it.
ConfigError ExpectOnlyError(const std::string& yaml, const std::string& text, int line,
                            const std::string& where) {
  const std::vector<ConfigError> errors = MustFail(yaml);
  EXPECT_EQ(errors.size(), 1u) << Dump(errors);
  if (errors.empty()) return ConfigError{};
  EXPECT_TRUE(Contains(errors[0].message, text)) << Dump(errors);
  EXPECT_EQ(errors[0].place.line, line) << Dump(errors);
  EXPECT_EQ(errors[0].where, where) << Dump(errors);
  return errors[0];
}

Path MustParsePath(const std::string& text) {
  Path path;
  Status status = ParsePath(text, &path);
  EXPECT_TRUE(status.ok()) << text << ": " << status.ToString();
  return path;
}

std::string PathError(const std::string& text) {
  Path path;
  Status status = ParsePath(text, &path);
  EXPECT_TRUE(status.IsInvalidInput()) << text;
  return status.message();
}

std::string TemplateError(const std::string& text) {
  Template parsed;
  Status status = ParseTemplate(text, &parsed);
  EXPECT_TRUE(status.IsInvalidInput()) << text;
  return status.message();
}

// The canonical form of a derived field (DerivationSpec::Normalized).
std::string Derived(const Expression& expression) {
  EXPECT_EQ(expression.kind, Expression::Kind::kDerived);
  return expression.spec == nullptr ? "" : expression.spec->Normalized();
}

// The value_json of `{value: <literal>}`.
std::string ValueJson(const std::string& literal) {
  const Config config =
      MustParse(std::string(kHead) + "  p:\n    from: book\n    fields:\n      f: {value: " +
                literal + "}\n");
  if (config.projections.empty() || config.projections[0].fields.empty()) return "<none>";
  EXPECT_EQ(config.projections[0].fields[0].second.kind, Expression::Kind::kValue);
  return config.projections[0].fields[0].second.value_json;
}

const Expression& Field(const ProjectionConfig& projection, size_t i) {
  return projection.fields.at(i).second;
}

void ExpectSteps(const Path& path, const std::vector<std::string>& expected) {
  std::vector<std::string> steps;
  for (const PathStep& step : path.steps) {
    switch (step.kind) {
      case PathStep::Kind::kField: steps.push_back(step.field); break;
      case PathStep::Kind::kIndex: steps.push_back("[" + std::to_string(step.index) + "]"); break;
      case PathStep::Kind::kFirstWith: steps.push_back("[]"); break;
    }
  }
  EXPECT_EQ(steps, expected) << path.text;
}

// ---------------------------------------------------------------------------
// The article configuration.

TEST(ConfigArticleTest, LoadsWithoutErrors) {
  const std::string file = testing::SourcePath("tests/data/article/config.yaml");
  std::vector<ConfigError> errors;
  const std::optional<Config> config = LoadConfig(file, &errors);
  ASSERT_TRUE(config.has_value()) << Dump(errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(config->path, file);

  ASSERT_TRUE(config->kafka.has_value());
  EXPECT_EQ(config->kafka->brokers, "localhost:9092");
  EXPECT_EQ(config->kafka->topics, std::vector<std::string>{"article.entities"});
  EXPECT_EQ(config->kafka->group, "denormd-article");
  EXPECT_EQ(config->kafka->dead_letter_topic, "");
  EXPECT_EQ(config->store.postgres, "postgresql://localhost:5432/denorm");
  EXPECT_EQ(config->store.schema, "article");
  EXPECT_EQ(config->batch.max_events, 5000u);
  EXPECT_EQ(config->batch.max_delay_ms, 50u);
  EXPECT_EQ(config->entities.size(), 10u);
  EXPECT_TRUE(config->HasEntity("contactDetail"));
  EXPECT_FALSE(config->HasEntity("Book"));

  std::vector<std::string> names;
  for (const ProjectionConfig& p : config->projections) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"people", "portfolios", "stocks", "publishers",
                                             "authors", "books", "posts", "post_comments",
                                             "catalog_books", "catalog_reviews"}));
  EXPECT_EQ(config->FindProjection("nope"), nullptr);
}

TEST(ConfigArticleTest, StructsMatchTheFile) {
  std::vector<ConfigError> errors;
  const std::optional<Config> config =
      LoadConfig(testing::SourcePath("tests/data/article/config.yaml"), &errors);
  ASSERT_TRUE(config.has_value()) << Dump(errors);

  const ProjectionConfig* people = config->FindProjection("people");
  ASSERT_NE(people, nullptr);
  EXPECT_EQ(people->kind, ProjectionConfig::Kind::kEntity);
  EXPECT_EQ(people->from, "person");
  EXPECT_EQ(people->collection, "people");
  EXPECT_EQ(people->place.line, 10);
  ASSERT_EQ(people->fields.size(), 2u);
  EXPECT_EQ(people->fields[0].first, "addresses");
  EXPECT_EQ(Field(*people, 0).derivation, "embed");
  EXPECT_EQ(Derived(Field(*people, 0)),
            "embed address via personId select [line1, line2, city, state, zip]");

  const ProjectionConfig* portfolios = config->FindProjection("portfolios");
  ASSERT_NE(portfolios, nullptr);
  EXPECT_TRUE(portfolios->has_include);
  EXPECT_EQ(portfolios->include,
            (std::vector<std::string>{"firstName", "lastName", "holdings"}));

  const ProjectionConfig* authors = config->FindProjection("authors");
  ASSERT_NE(authors, nullptr);
  EXPECT_EQ(Derived(Field(*authors, 0)), "count book via authorIds");
  EXPECT_EQ(Derived(Field(*authors, 1)), "ids book via authorIds");

  const ProjectionConfig* books = config->FindProjection("books");
  ASSERT_NE(books, nullptr);
  EXPECT_FALSE(books->has_include);
  EXPECT_EQ(books->exclude, std::vector<std::string>{"authorIds"});
  const Expression& lookup = Field(*books, 0);
  EXPECT_EQ(lookup.place.line, 40);  // the map under "authors:"
  EXPECT_EQ(Derived(lookup),
            "lookup author by authorIds select {id: id, name: \"{firstName} {lastName}\", "
            "thumbnailUrl: images[].thumbnail}");

  const ProjectionConfig* posts = config->FindProjection("posts");
  ASSERT_NE(posts, nullptr);
  ASSERT_EQ(posts->fields.size(), 2u);
  EXPECT_EQ(posts->fields[0].first, "recentComments");  // file order kept
  EXPECT_EQ(posts->fields[1].first, "countOfComments");
  EXPECT_EQ(Derived(Field(*posts, 0)),
            "embed comment via postId order_by -createdAt limit 3 select [id, author, comment]");

  const ProjectionConfig* buckets = config->FindProjection("post_comments");
  ASSERT_NE(buckets, nullptr);
  EXPECT_EQ(buckets->kind, ProjectionConfig::Kind::kBuckets);
  EXPECT_EQ(buckets->buckets, "comment");
  ExpectSteps(buckets->by, {"postId"});
  EXPECT_EQ(buckets->size, 100u);
  EXPECT_EQ(buckets->field, "comments");
  EXPECT_TRUE(buckets->order_by.present);
  EXPECT_FALSE(buckets->order_by.descending);
  EXPECT_EQ(buckets->select.kind, Selection::Kind::kList);

  const ProjectionConfig* catalog_books = config->FindProjection("catalog_books");
  ASSERT_NE(catalog_books, nullptr);
  EXPECT_EQ(catalog_books->collection, "catalog");
  EXPECT_EQ(catalog_books->partition_key, "bookId");
  EXPECT_EQ(catalog_books->include, std::vector<std::string>{"name"});
  EXPECT_EQ(catalog_books->fields[0].first, "type");
  EXPECT_EQ(Field(*catalog_books, 0).kind, Expression::Kind::kValue);
  EXPECT_EQ(Field(*catalog_books, 0).value_json, "\"book\"");
  EXPECT_EQ(Field(*catalog_books, 1).kind, Expression::Kind::kTemplate);
  EXPECT_EQ(config->FindProjection("catalog_reviews")->collection, "catalog");
  EXPECT_EQ(config->FindProjection("catalog_reviews")->partition_key, "bookId");
}

TEST(ConfigTest, DefaultsWhenKeysAreLeftOut) {
  const Config config = MustParse(std::string(kHead) + R"(  authors:
    from: author
    fields:
      by_author: {lookup: author, by: authorId}
  comments_by_book:
    buckets: comment
    by: bookId
)");
  EXPECT_FALSE(config.kafka.has_value());
  EXPECT_EQ(config.store.postgres, "");
  EXPECT_EQ(config.batch.max_events, 5000u);
  EXPECT_EQ(config.batch.max_delay_ms, 50u);
  ASSERT_EQ(config.projections.size(), 2u);
  EXPECT_EQ(config.projections[0].collection, "authors");
  EXPECT_EQ(config.projections[0].partition_key, "");
  EXPECT_EQ(Derived(Field(config.projections[0], 0)), "lookup author by authorId");
  const ProjectionConfig& buckets = config.projections[1];
  EXPECT_EQ(buckets.size, 100u);
  EXPECT_EQ(buckets.field, "items");
  EXPECT_FALSE(buckets.order_by.present);
  EXPECT_EQ(buckets.select.kind, Selection::Kind::kWhole);
}

TEST(ConfigTest, ReadsEveryOptionalKey) {
  const Config config = MustParse(R"(source:
  kafka:
    brokers: k1:9092,k2:9092
    topics: [a, b]
    group: g
    dead_letter_topic: dlq
store: {postgres: "host=db", schema: lib_2}
batch: {max_events: 10, max_delay_ms: 0}
entities: [author, book, comment]
projections:
  books:
    from: book
    fields:
      writers: {lookup: author, by: "authorIds", missing: null, select: {n: "{name}!"}}
      recent: {ids: comment, via: bookId, limit: 2}
      first: authors[0].name
  p2:
    buckets: comment
    by: bookId
    size: 7
    field: page
    order_by: -at
    select: {who: author.name, kind: {value: [1, "x"]}}
)");
  ASSERT_TRUE(config.kafka.has_value());
  EXPECT_EQ(config.kafka->topics, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(config.kafka->dead_letter_topic, "dlq");
  EXPECT_EQ(config.store.postgres, "host=db");
  EXPECT_EQ(config.batch.max_events, 10u);
  EXPECT_EQ(config.batch.max_delay_ms, 0u);
  const ProjectionConfig& books = config.projections[0];
  EXPECT_EQ(Derived(Field(books, 0)), "lookup author by authorIds select {n: \"{name}!\"} missing null");
  EXPECT_EQ(Derived(Field(books, 1)), "ids comment via bookId limit 2");
  ExpectSteps(Field(books, 2).path, {"authors", "[0]", "name"});
  const ProjectionConfig& p2 = config.projections[1];
  EXPECT_EQ(p2.size, 7u);
  EXPECT_EQ(p2.field, "page");
  EXPECT_TRUE(p2.order_by.descending);
  ASSERT_EQ(p2.select.map.size(), 2u);
  ExpectSteps(p2.select.map[0].second.path, {"author", "name"});
  EXPECT_EQ(p2.select.map[1].second.value_json, "[1,\"x\"]");
}

TEST(ConfigTest, RetentionHasDefaultsAndEveryKeyCanBeSet) {
  const RetentionConfig defaults;
  EXPECT_EQ(defaults.tombstone_hours, 168u);
  EXPECT_EQ(defaults.dead_letter_days, 30u);
  EXPECT_EQ(defaults.max_dead_letters, 100000u);
  EXPECT_EQ(defaults.interval_s, 300u);
  const Config config = MustParse(std::string(kHead) + R"(  p: {from: book}
retention: {tombstone_hours: 0, dead_letter_days: 2, max_dead_letters: 5, interval_s: 60}
)");
  EXPECT_EQ(config.retention.tombstone_hours, 0u);
  EXPECT_EQ(config.retention.dead_letter_days, 2u);
  EXPECT_EQ(config.retention.max_dead_letters, 5u);
  EXPECT_EQ(config.retention.interval_s, 60u);
  ExpectOnlyError(std::string(kHead) + "  p: {from: book}\nretention: {tombstone_hour: 1}\n",
                  "unknown key \"tombstone_hour\" (did you mean \"tombstone_hours\"?)", 5,
                  "retention.tombstone_hour");
  ExpectOnlyError(std::string(kHead) + "  p: {from: book}\nretention: {interval_s: -1}\n",
                  "must be an integer >= 0, found", 5, "retention.interval_s");
}

TEST(ConfigTest, Yaml11WordsStayStrings) {
  const Config config = MustParse(R"(store: {schema: lib}
entities: [yes, no, on, off]
projections:
  y:
    from: yes
    fields: {on: off, n: {count: no, via: y}}
)");
  EXPECT_EQ(config.entities, (std::vector<std::string>{"yes", "no", "on", "off"}));
  EXPECT_EQ(config.projections[0].from, "yes");
  EXPECT_EQ(config.projections[0].fields[0].first, "on");
  ExpectSteps(Field(config.projections[0], 0).path, {"off"});
  EXPECT_EQ(Derived(Field(config.projections[0], 1)), "count no via y");
}

// ---------------------------------------------------------------------------
// Paths and templates.

TEST(PathTest, ParsesFieldsIndexesAndFirstWith) {
  ExpectSteps(MustParsePath("id"), {"id"});
  ExpectSteps(MustParsePath("a.b.c"), {"a", "b", "c"});
  ExpectSteps(MustParsePath("a[0].b"), {"a", "[0]", "b"});
  ExpectSteps(MustParsePath("images[].thumbnail"), {"images", "[]", "thumbnail"});
  ExpectSteps(MustParsePath("a[0].b[].c"), {"a", "[0]", "b", "[]", "c"});
  ExpectSteps(MustParsePath("m[1][12]"), {"m", "[1]", "[12]"});
  ExpectSteps(MustParsePath("$ref.x-y_z.9"), {"$ref", "x-y_z", "9"});
  ExpectSteps(MustParsePath("név:1"), {"név:1"});
  const Path path = MustParsePath("a[7]");
  EXPECT_EQ(path.text, "a[7]");
  EXPECT_EQ(path.steps[1].kind, PathStep::Kind::kIndex);
  EXPECT_EQ(path.steps[1].index, 7u);
}

TEST(PathTest, RejectsBadSyntaxWithAClearMessage) {
  EXPECT_EQ(PathError(""), "bad path \"\": the path is empty");
  EXPECT_TRUE(Contains(PathError("a..b"), "empty field name at character 3"));
  EXPECT_TRUE(Contains(PathError(".a"), "empty field name at character 1"));
  EXPECT_TRUE(Contains(PathError("a."), "empty field name at character 3"));
  EXPECT_TRUE(Contains(PathError("a[0"), "'[' at character 2 is not closed"));
  EXPECT_TRUE(Contains(PathError("a[x]"), "index \"x\" at character 2 is not a non-negative"));
  EXPECT_TRUE(Contains(PathError("a[-1]"), "index \"-1\""));
  EXPECT_TRUE(Contains(PathError("a[]"), "'[]' must be followed by '.field'"));
  EXPECT_TRUE(Contains(PathError("a[][0]"), "'[]' must be followed by '.field'"));
  EXPECT_TRUE(Contains(PathError("[0]"), "'[' must follow a field name"));
  EXPECT_TRUE(Contains(PathError("a[0]b"), "unexpected \"b\" at character 5"));
  EXPECT_TRUE(Contains(PathError("a b"), "unexpected \" \" at character 2"));
  EXPECT_TRUE(Contains(PathError("a]"), "unexpected \"]\""));
  EXPECT_TRUE(Contains(PathError("a{b}"), "unexpected \"{\""));
  EXPECT_TRUE(Contains(PathError("a[99999999999999999999999]"), "not a non-negative integer"));
}

TEST(TemplateTest, ParsesLiteralsPathsAndEscapedBraces) {
  Template t;
  ASSERT_TRUE(ParseTemplate("{firstName} {lastName}", &t).ok());
  EXPECT_EQ(t.text, "{firstName} {lastName}");
  ASSERT_EQ(t.parts.size(), 3u);
  EXPECT_TRUE(t.parts[0].is_path);
  EXPECT_EQ(t.parts[0].path.text, "firstName");
  EXPECT_EQ(t.parts[1].literal, " ");
  EXPECT_EQ(t.parts[2].path.text, "lastName");

  ASSERT_TRUE(ParseTemplate("{{x}}={a[0].b}!", &t).ok());
  ASSERT_EQ(t.parts.size(), 3u);
  EXPECT_FALSE(t.parts[0].is_path);
  EXPECT_EQ(t.parts[0].literal, "{x}=");
  ExpectSteps(t.parts[1].path, {"a", "[0]", "b"});
  EXPECT_EQ(t.parts[2].literal, "!");

  ASSERT_TRUE(ParseTemplate("{id}", &t).ok());
  ASSERT_EQ(t.parts.size(), 1u);
  EXPECT_TRUE(t.parts[0].is_path);
}

TEST(TemplateTest, RejectsBadSyntax) {
  EXPECT_TRUE(Contains(TemplateError("{a"), "'{' at character 1 is not closed"));
  EXPECT_TRUE(Contains(TemplateError("x {a} }"), "stray '}' at character 7"));
  EXPECT_TRUE(Contains(TemplateError("{}"), "the path is empty"));
  EXPECT_TRUE(Contains(TemplateError("{a..b}"), "bad path \"a..b\": empty field name"));
  EXPECT_TRUE(Contains(TemplateError("{ a }"), "unexpected \" \""));
  EXPECT_TRUE(Contains(TemplateError("{a{b}}"), "bad template \"{a{b}}\""));
}

TEST(ValueTest, ConvertsYamlToCompactJson) {
  EXPECT_EQ(ValueJson("book"), "\"book\"");
  EXPECT_EQ(ValueJson("null"), "null");
  EXPECT_EQ(ValueJson("~"), "null");
  EXPECT_EQ(ValueJson(""), "null");
  EXPECT_EQ(ValueJson("true"), "true");
  EXPECT_EQ(ValueJson("False"), "false");
  EXPECT_EQ(ValueJson("yes"), "\"yes\"");
  EXPECT_EQ(ValueJson("7"), "7");
  EXPECT_EQ(ValueJson("\"7\""), "\"7\"");
  EXPECT_EQ(ValueJson("'true'"), "\"true\"");
  EXPECT_EQ(ValueJson("!!str 5"), "\"5\"");
  EXPECT_EQ(ValueJson("-12"), "-12");
  EXPECT_EQ(ValueJson("+007"), "7");
  EXPECT_EQ(ValueJson("1.5e3"), "1.5e3");
  EXPECT_EQ(ValueJson(".5"), "0.5");
  EXPECT_EQ(ValueJson("2."), "2.0");
  EXPECT_EQ(ValueJson("0x1F"), "31");
  EXPECT_EQ(ValueJson(".inf"), "\".inf\"");
  EXPECT_EQ(ValueJson("1.2.3"), "\"1.2.3\"");
  EXPECT_EQ(ValueJson("\"a \\\"q\\\" \\\\ \\t\""), "\"a \\\"q\\\" \\\\ \\t\"");
  EXPECT_EQ(ValueJson("[1, two, {k: null, n: [true]}]"), "[1,\"two\",{\"k\":null,\"n\":[true]}]");
  EXPECT_EQ(ValueJson("{}"), "{}");
}

// ---------------------------------------------------------------------------
// Errors: one test per class, each checking the message and the line.

TEST(ConfigErrorTest, YamlSyntaxErrorReportsTheParsersLine) {
  const ConfigError e = ExpectOnlyError(std::string(kHead) + "  p:\n    from: [book\n",
                                        "YAML syntax error", 6, "");
  EXPECT_GT(e.place.column, 0);
}

TEST(ConfigErrorTest, UnknownKeySuggestsTheClosestKey) {
  const ConfigError e = ExpectOnlyError(std::string(kHead) + R"(  p:
    from: book
    fields:
      a: {embed: comment, via: bookId, selec: [id]}
)", "unknown key \"selec\" (did you mean \"select\"?)", 7, "projections.p.fields.a.selec");
  EXPECT_EQ(e.place.column, 40);
  ExpectOnlyError(std::string(kHead) + "  p: {from: book, zzz: 1}\n", "unknown key \"zzz\"", 4,
                  "projections.p.zzz");
  const std::vector<ConfigError> errors =
      MustFail("store: {schema: s, postgress: x}\nentities: [a]\nprojection: {}\n");
  ASSERT_EQ(errors.size(), 3u) << Dump(errors);
  EXPECT_EQ(errors[0].message, "unknown key \"postgress\" (did you mean \"postgres\"?)");
  // The misspelling first, then the missing key at the same place.
  EXPECT_EQ(errors[1].message, "unknown key \"projection\" (did you mean \"projections\"?)");
  EXPECT_EQ(errors[1].place.line, 3);
  EXPECT_EQ(errors[2].message, "missing required key \"projections\" (given as \"projection\"?)");
  EXPECT_EQ(errors[2].place.line, 3);
  EXPECT_EQ(errors[2].place.column, errors[1].place.column);
}

// A typo of a required key: the unknown key with its suggestion comes before
// the missing key, which is said at the typo (it was said at the map's start,
// first, and the useful message second).
// A limit PostgreSQL could not take is refused where it is written.
TEST(ConfigErrorTest, ALimitBeyondAnIntegerIsRefused) {
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n"
                                       "      a: {embed: comment, via: bookId, limit: 99999999999}\n",
                  "must be at most 2147483647 (a count PostgreSQL reads as a 32-bit integer), "
                  "found 99999999999",
                  7, "projections.p.fields.a.limit");
  MustParse(std::string(kHead) + "  p:\n    from: book\n    fields:\n"
                                 "      a: {ids: comment, via: bookId, limit: 2147483647}\n");
}

TEST(ConfigErrorTest, AMisspelledRequiredKeyIsNamedBeforeItIsMissing) {
  const std::vector<ConfigError> errors = MustFail(std::string(kHead) + R"(  p:
    from: book
    fields:
      a: {ids: comment, vai: bookId}
)");
  ASSERT_EQ(errors.size(), 2u) << Dump(errors);
  EXPECT_EQ(errors[0].message, "unknown key \"vai\" (did you mean \"via\"?)");
  EXPECT_EQ(errors[1].message, "missing required key \"via\" (given as \"vai\"?)");
  EXPECT_EQ(errors[1].place.line, errors[0].place.line);
  EXPECT_EQ(errors[1].place.column, errors[0].place.column);
  // Without a near miss, the missing key is said where the map starts.
  const std::vector<ConfigError> far = MustFail(std::string(kHead) + R"(  p:
    from: book
    fields:
      a: {ids: comment, zzz: bookId}
)");
  ASSERT_EQ(far.size(), 2u) << Dump(far);
  EXPECT_EQ(far[0].message, "missing required key \"via\"");
  EXPECT_EQ(far[1].message, "unknown key \"zzz\"");
}

TEST(ConfigErrorTest, KeyOfAnotherExpressionKindIsNamedAsMisplaced) {
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n"
                                       "      a: {count: author, via: x, select: [name]}\n",
                  "\"select\" is not allowed in a count (allowed: count, via, through, from, to)", 7,
                  "projections.p.fields.a.select");
  // A key of the kind that only applies in its other form says so.
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n"
                                       "      a: {lookup: author, by: x, limit: 3}\n",
                  "\"limit\" applies to a lookup through a link (through, from, to) only; by "
                  "shows its targets in the order the field names them", 7,
                  "projections.p.fields.a.limit");
}

TEST(ConfigErrorTest, WrongNodeType) {
  ExpectOnlyError("store: {schema: s}\nentities: {a: 1}\nprojections: {}\n",
                  "expected a list of entity types, found a map", 2, "entities");
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields: [a, b]\n",
                  "expected a map, found a list", 6, "projections.p.fields");
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n      a: [x]\n",
                  "expected a path, a \"{template}\" string or a map", 7,
                  "projections.p.fields.a");
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: [book]\n",
                  "expected a string, found a list", 5, "projections.p.from");
  ExpectOnlyError(std::string(kHead) + "  p:\n    buckets: comment\n    by: b\n    select: x\n",
                  "select must be a list of field names or a map", 7, "projections.p.select");
  ExpectOnlyError("- a\n- b\n", "the configuration must be a map", 1, "");
}

TEST(ConfigErrorTest, MissingRequiredKeys) {
  ExpectOnlyError("store: {postgres: x}\nentities: [a]\nprojections: {}\n",
                  "missing required key \"schema\"", 1, "store.schema");
  ExpectOnlyError("entities: [a]\nprojections: {}\n", "missing required key \"store\"", 1,
                  "store");
  ExpectOnlyError("store: {schema: s}\nprojections: {}\n", "missing required key \"entities\"",
                  1, "entities");
  ExpectOnlyError(std::string(kHead) + "  p:\n    collection: c\n",
                  "missing required key \"from\" or \"buckets\"", 5, "projections.p");
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields: {n: {count: comment}}\n",
                  "missing required key \"via\"", 6, "projections.p.fields.n.via");
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields: {n: {ids: comment}}\n",
                  "missing required key \"via\"", 6, "projections.p.fields.n.via");
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n"
                                       "      n:\n        embed: comment\n        limit: 2\n",
                  "missing required key \"via\"", 8, "projections.p.fields.n.via");
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields: {n: {lookup: author}}\n",
                  "missing required key \"by\"", 6, "projections.p.fields.n.by");
  ExpectOnlyError(std::string(kHead) + "  p:\n    buckets: comment\n",
                  "missing required key \"by\"", 5, "projections.p.by");
  ExpectOnlyError("", "the configuration is empty", 0, "");
}

TEST(ConfigErrorTest, KafkaBlockNeedsBrokersTopicsAndGroup) {
  const std::vector<ConfigError> errors = MustFail(R"(source:
  kafka:
    dead_letter_topic: dlq
store: {schema: s}
entities: [a]
projections: {}
)");
  ASSERT_EQ(errors.size(), 3u) << Dump(errors);
  EXPECT_EQ(errors[0].where, "source.kafka.brokers");
  EXPECT_EQ(errors[1].where, "source.kafka.topics");
  EXPECT_EQ(errors[2].where, "source.kafka.group");
  EXPECT_EQ(errors[0].place.line, 3);
  ExpectOnlyError(R"(source:
  kafka: {brokers: b, group: g,
          topics: []}
store: {schema: s}
entities: [a]
projections: {}
)", "must not be an empty list", 3, "source.kafka.topics");
}

TEST(ConfigErrorTest, UnknownEntityType) {
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: bok\n",
                  "unknown entity type \"bok\" (not in entities) (did you mean \"book\"?)", 5,
                  "projections.p.from");
  ExpectOnlyError(std::string(kHead) + "  p:\n    buckets: review\n    by: bookId\n",
                  "unknown entity type \"review\"", 5, "projections.p.buckets");
  for (const std::string kind : {"count", "ids", "embed"}) {
    ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n      x: {" + kind +
                        ": page, via: bookId}\n",
                    "unknown entity type \"page\"", 7, "projections.p.fields.x." + kind);
  }
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n"
                                       "      x: {lookup: publisher, by: pubId}\n",
                  "unknown entity type \"publisher\"", 7, "projections.p.fields.x.lookup");
}

TEST(ConfigErrorTest, DuplicateEntityNamesAndEmptyEntityName) {
  ExpectOnlyError("store: {schema: s}\nentities:\n  - a\n  - b\n  - a\nprojections: {}\n",
                  "duplicate entity type \"a\" (also entities[0])", 5, "entities[2]");
  ExpectOnlyError("store: {schema: s}\nentities: [a, \"\"]\nprojections: {}\n",
                  "must not be empty", 2, "entities[1]");
  ExpectOnlyError("store: {schema: s}\nentities: []\nprojections: {}\n",
                  "must not be an empty list", 2, "entities");
}

TEST(ConfigErrorTest, DuplicateKeys) {
  ExpectOnlyError(std::string(kHead) + "  p: {from: book}\n  p: {from: author}\n",
                  "duplicate key \"p\" (first at line 4)", 5, "projections.p");
}

TEST(ConfigErrorTest, BadPathTemplateAndOrderBy) {
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n"
                                       "      n: {count: comment, via: \"a..b\"}\n",
                  "bad path \"a..b\": empty field name at character 3", 7,
                  "projections.p.fields.n.via");
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n      t: \"{a\"\n",
                  "bad template \"{a\": '{' at character 1 is not closed", 7,
                  "projections.p.fields.t");
  ExpectOnlyError(std::string(kHead) +
                      "  p:\n    buckets: comment\n    by: b\n    order_by: \"-\"\n",
                  "bad order_by \"-\"", 7, "projections.p.order_by");
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n"
                                       "      e: {embed: comment, via: c, order_by: \"x[\"}\n",
                  "bad order_by \"x[\"", 7, "projections.p.fields.e.order_by");
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n      t: {id}\n",
                  "(a template must be quoted: \"{...}\")", 7, "projections.p.fields.t");
}

TEST(ConfigErrorTest, LimitAndSizeMustBePositiveIntegers) {
  for (const std::string bad : {"0", "-1", "abc", "1.5", "[1]"}) {
    ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n"
                                         "      n: {ids: comment, via: c, limit: " + bad + "}\n",
                    "must be a positive integer", 7, "projections.p.fields.n.limit");
  }
  ExpectOnlyError(std::string(kHead) + "  p:\n    buckets: comment\n    by: b\n    size: 0\n",
                  "must be a positive integer, found the scalar \"0\"", 7, "projections.p.size");
  ExpectOnlyError("store: {schema: s}\nbatch: {max_events: 0}\nentities: [a]\nprojections: {}\n",
                  "must be a positive integer", 2, "batch.max_events");
}

TEST(ConfigErrorTest, MissingMustBeSkipOrNull) {
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n"
                                       "      a: {lookup: author, by: x, missing: drop}\n",
                  "missing must be skip or null, found the scalar \"drop\"", 7,
                  "projections.p.fields.a.missing");
}

TEST(ConfigErrorTest, IncludeAndExcludeTogether) {
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    include: [a]\n    exclude: [b]\n",
                  "give either \"include\" or \"exclude\", not both", 7, "projections.p.exclude");
}

TEST(ConfigErrorTest, FromAndBucketsTogetherOrMixed) {
  ExpectOnlyError(std::string(kHead) + "  p: {from: book, buckets: comment, by: x}\n",
                  "give either \"from\" or \"buckets\", not both", 4, "projections.p");
  ExpectOnlyError(std::string(kHead) + "  p:\n    buckets: comment\n    by: x\n    fields: {}\n",
                  "\"fields\" is not allowed in a buckets projection", 7, "projections.p.fields");
  ExpectOnlyError(std::string(kHead) + "  p:\n    buckets: comment\n    by: x\n"
                                       "    partition_key: x\n",
                  "\"partition_key\" is not allowed in a buckets projection", 7,
                  "projections.p.partition_key");
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    size: 3\n",
                  "\"size\" is only allowed in a buckets projection", 6, "projections.p.size");
  ExpectOnlyError(std::string(kHead) + "  p:\n    buckets: comment\n    by: x\n    field: x\n",
                  "would overwrite the document's \"x\"", 7, "projections.p.field");
}

TEST(ConfigErrorTest, SelectMapAllowsOnlyPathsTemplatesAndValues) {
  ExpectOnlyError(std::string(kHead) + R"(  p:
    from: book
    fields:
      a:
        lookup: author
        by: authorIds
        select:
          n: {count: book, via: authorIds}
)", "a select map holds only paths, templates and {value: ...}", 11,
                  "projections.p.fields.a.select.n");
}

TEST(ConfigErrorTest, ExpressionMapNeedsExactlyOneKind) {
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n"
                                       "      a: {count: book, ids: book, via: x}\n",
                  "give exactly one of value, count, ids, embed, lookup, found count, ids", 7,
                  "projections.p.fields.a");
}

TEST(ConfigErrorTest, CollectionAndSchemaMustBeSqlIdentifiers) {
  const std::string bad_identifier = "is not a valid SQL identifier";
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    collection: Catalog\n",
                  "collection \"Catalog\" " + bad_identifier, 6, "projections.p.collection");
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    collection: 1st\n",
                  bad_identifier, 6, "projections.p.collection");
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    collection: " +
                      std::string(64, 'a') + "\n",
                  bad_identifier, 6, "projections.p.collection");
  MustParse(std::string(kHead) + "  p:\n    from: book\n    collection: " + std::string(47, 'a') +
            "\n");
  ExpectOnlyError(std::string(kHead) + "  Books:\n    from: book\n",
                  "collection (the projection's name) \"Books\" " + bad_identifier, 4,
                  "projections.Books");
  ExpectOnlyError("store: {schema: my-schema}\nentities: [a]\nprojections: {}\n",
                  "schema \"my-schema\" " + bad_identifier, 1, "store.schema");
}

TEST(ConfigErrorTest, CollectionMustNotClashWithInternalTables) {
  for (const std::string name : {"entities", "refs", "refs_by_entity", "refs_by_owner", "ref_counts", "positions",
                                 "dead_letters", "locks", "writers", "meta", "outbox",
                                 "apply_journal"}) {
    ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    collection: " + name + "\n",
                    "clashes with a table denormd keeps itself", 6, "projections.p.collection");
  }
  ExpectOnlyError(std::string(kHead) + "  refs:\n    from: book\n",
                  "clashes with a table denormd keeps itself", 4, "projections.refs");
}

TEST(ConfigErrorTest, CollectionNamesOfApplysTablesAreRefused) {
  for (const std::string name : {"books__next", "books__plan"}) {
    ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    collection: " + name + "\n",
                    "names ending in __next or __plan", 6, "projections.p.collection");
  }
  MustParse(std::string(kHead) + "  p:\n    from: book\n    collection: books_next\n");
}

TEST(ConfigErrorTest, CollectionNamesFitTheirIndexNames) {
  const std::string longest(47, 'c');
  MustParse(std::string(kHead) + "  p:\n    from: book\n    collection: " + longest + "\n");
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    collection: " + longest + "x\n",
                  "is 48 characters long; a collection name is at most 47", 6,
                  "projections.p.collection");
}

TEST(ConfigErrorTest, SharedCollectionWithoutPartitionKeyIsReportedAtEachProjection) {
  const std::vector<ConfigError> errors = MustFail(std::string(kHead) + R"(  a:
    from: book
    collection: mixed
  b:
    from: author
    collection: mixed
)");
  ASSERT_EQ(errors.size(), 2u) << Dump(errors);
  EXPECT_EQ(errors[0].place.line, 6);
  EXPECT_EQ(errors[0].where, "projections.a.collection");
  EXPECT_TRUE(Contains(errors[0].message, "collection \"mixed\" is also written by \"b\""));
  EXPECT_TRUE(Contains(errors[0].message, "two projections writing different types into one "
                                           "collection without a partition key"));
  EXPECT_EQ(errors[1].place.line, 9);
  EXPECT_TRUE(Contains(errors[1].message, "also written by \"a\""));

  // Only the projection without a partition key is at fault.
  ExpectOnlyError(std::string(kHead) + R"(  a:
    from: book
    collection: mixed
    partition_key: bookId
  mixed:
    from: author
)", "without a partition key", 8, "projections.mixed");
}

TEST(ConfigErrorTest, SharedCollectionWithDifferentPartitionKeys) {
  const std::vector<ConfigError> errors = MustFail(std::string(kHead) + R"(  a:
    from: book
    collection: mixed
    partition_key: bookId
  b:
    from: author
    collection: mixed
    partition_key: authorId
)");
  ASSERT_EQ(errors.size(), 2u) << Dump(errors);
  EXPECT_TRUE(Contains(errors[0].message, "with a different partition_key (this one: \"bookId\")"));
  EXPECT_EQ(errors[0].place.line, 6);
  EXPECT_TRUE(Contains(errors[1].message, "(this one: \"authorId\")"));
  EXPECT_EQ(errors[1].place.line, 10);
}

TEST(ConfigErrorTest, BucketsProjectionNeedsItsOwnCollection) {
  const std::vector<ConfigError> errors = MustFail(std::string(kHead) + R"(  pages:
    buckets: comment
    by: bookId
    collection: shared
  others:
    from: book
    collection: shared
    partition_key: bookId
)");
  ASSERT_EQ(errors.size(), 2u) << Dump(errors);
  EXPECT_EQ(errors[0].where, "projections.pages.collection");
  EXPECT_EQ(errors[0].place.line, 7);
  EXPECT_TRUE(Contains(errors[0].message, "a buckets projection needs a collection of its own"));
  EXPECT_EQ(errors[1].where, "projections.others.collection");
}

TEST(ConfigErrorTest, FieldNames) {
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n      \"\": id\n",
                  "a field name must not be empty", 7, "projections.p.fields.\"\"");
  ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n      id: name\n",
                  "\"id\" is the document's id", 7, "projections.p.fields.id");
}

TEST(ConfigErrorTest, SeveralErrorsAreAllReportedInFileOrder) {
  const std::vector<ConfigError> errors = MustFail(R"(store: {schema: Lib}
entities: [author, book, author]
projections:
  books:
    from: book
    include: [a]
    exclude: [b]
    fields:
      n: {count: comment, via: x}
      t: "{a"
  pages:
    buckets: book
    by: x
    size: 0
    colection: pages
)");
  ASSERT_EQ(errors.size(), 7u) << Dump(errors);
  const std::vector<int> lines = {1, 2, 7, 9, 10, 14, 15};
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(errors[i].place.line, lines[i]) << Dump(errors);
  }
  EXPECT_TRUE(Contains(errors[0].message, "not a valid SQL identifier"));
  EXPECT_TRUE(Contains(errors[1].message, "duplicate entity type"));
  EXPECT_TRUE(Contains(errors[2].message, "not both"));
  EXPECT_TRUE(Contains(errors[3].message, "unknown entity type \"comment\""));
  EXPECT_TRUE(Contains(errors[4].message, "bad template"));
  EXPECT_TRUE(Contains(errors[5].message, "positive integer"));
  EXPECT_TRUE(Contains(errors[6].message, "did you mean \"collection\""));
}

TEST(ConfigErrorTest, SeveralYamlDocuments) {
  ExpectOnlyError(std::string(kHead) + "  p: {from: book}\n---\nx: 1\n",
                  "several YAML documents", 5, "");  // the "---" that starts the second
}

// Found by tests/fuzz: yaml-cpp 0.7's LoadAll never returns (and grows
// without bound) on a line that starts with ",". The parser must answer.
TEST(ConfigErrorTest, ALineStartingWithACommaIsAnErrorNotAHang) {
  for (const std::string& text : {std::string("\n,\n"), std::string(kHead) + ",\n"}) {
    std::vector<ConfigError> errors;
    EXPECT_FALSE(ParseConfig(text, "t.yaml", &errors).has_value()) << text;
    EXPECT_FALSE(errors.empty()) << text;
  }
}

TEST(ConfigErrorTest, GarbageNeverThrows) {
  for (const std::string text : {"\t", "[[[", "{a: b", "a: b: c", "&x [*x, *y]", "\xff\xfe\x00",
                                 ": :", "%YAML 9.9\n---\n", "!!binary x"}) {
    std::vector<ConfigError> errors;
    EXPECT_NO_THROW({
      EXPECT_FALSE(ParseConfig(text, "t.yaml", &errors).has_value()) << text;
      EXPECT_FALSE(errors.empty());
    });
  }
}

TEST(ConfigErrorTest, ToStringFormat) {
  ConfigError e{{3, 7}, "projections.p.from", "unknown entity type \"x\""};
  EXPECT_EQ(e.ToString("c.yaml"), "c.yaml:3:7: projections.p.from: unknown entity type \"x\"");
  e.place = ConfigPlace{};
  EXPECT_EQ(e.ToString("c.yaml"), "c.yaml: projections.p.from: unknown entity type \"x\"");
  e.where = "";
  EXPECT_EQ(e.ToString("c.yaml"), "c.yaml: unknown entity type \"x\"");
}

// YAML's escapes put any byte into a name ("\0", "\e"); the error that quotes
// it is one readable line, without a raw NUL or escape sequence in it.
TEST(ConfigErrorTest, ANameWithControlCharactersIsShownEscaped) {
  const std::vector<ConfigError> errors =
      MustFail(std::string(kHead) + "  \"bo\\0oks\\e[2J\":\n    from: book\n");
  ASSERT_EQ(errors.size(), 1u) << Dump(errors);
  const std::string line = errors[0].ToString("c.yaml");
  EXPECT_EQ(line.find('\0'), std::string::npos);
  EXPECT_EQ(line.find('\x1b'), std::string::npos);
  EXPECT_TRUE(Contains(line, "projections.bo\\x00oks\\x1b[2J: ")) << line;
  EXPECT_TRUE(Contains(line, "\"bo\\x00oks\\x1b[2J\" is not a valid SQL identifier")) << line;
  // A name in UTF-8 stays as it is.
  const ConfigError accented{{}, "projections.b\xc3\xbc" "cher", "m"};
  EXPECT_EQ(accented.ToString(""), "projections.b\xc3\xbc" "cher: m");
}

TEST(LoadConfigTest, UnreadableFileReportsTheOsReason) {
  std::vector<ConfigError> errors;
  EXPECT_FALSE(LoadConfig("/nonexistent/denormd.yaml", &errors).has_value());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString("/nonexistent/denormd.yaml"),
            "/nonexistent/denormd.yaml: cannot read the config file: No such file or directory");
  errors.clear();
  EXPECT_FALSE(LoadConfig(testing::SourcePath("tests"), &errors).has_value());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(Contains(errors[0].message, "Is a directory"));
}

// ---------------------------------------------------------------------------
// The change feed.

constexpr char kFeedHead[] = R"(source: {kafka: {brokers: k:9092, topics: [t], group: g}}
store: {schema: lib}
entities: [author, book, review]
projections:
  authors: {from: author}
  books: {from: book, collection: catalog, partition_key: bookId}
  reviews: {from: review, collection: catalog, partition_key: bookId}
)";

TEST(FeedConfigTest, OneTopicForEveryCollectionWithDefaults) {
  const Config config = MustParse(std::string(kFeedHead) + "feed: {topic: lib.docs}\n");
  ASSERT_TRUE(config.feed.has_value());
  const FeedConfig& feed = *config.feed;
  EXPECT_EQ(feed.brokers, "k:9092");  // the source's
  EXPECT_EQ(feed.transactional_id, "denormd-feed-lib");
  EXPECT_EQ(feed.progress_topic, "denormd-feed-lib.progress");
  EXPECT_EQ(feed.max_messages, 1000u);
  EXPECT_EQ(feed.poll_ms, 20u);
  EXPECT_EQ(feed.max_message_bytes, 1000000u);
  EXPECT_EQ(config.PublishedCollections(), std::vector<std::string>({"authors", "catalog"}));
  EXPECT_EQ(*feed.TopicOf("catalog"), "lib.docs");
  EXPECT_TRUE(config.HasPartitionKey("catalog"));
  EXPECT_FALSE(config.HasPartitionKey("authors"));
}

TEST(FeedConfigTest, CollectionsPickTheirTopicsAndOnlyThoseArePublished) {
  const Config config = MustParse(std::string(kFeedHead) +
                                  "feed:\n  collections: {catalog: lib.catalog}\n"
                                  "  brokers: f:9092\n  transactional_id: x\n"
                                  "  progress_topic: x.p\n  max_messages: 10\n"
                                  "  max_message_bytes: 2048\n  poll_ms: 5\n"
                                  "  properties: {linger.ms: 1}\n");
  const FeedConfig& feed = *config.feed;
  EXPECT_EQ(config.PublishedCollections(), std::vector<std::string>({"catalog"}));
  EXPECT_EQ(feed.TopicOf("authors"), nullptr);
  EXPECT_EQ(*feed.TopicOf("catalog"), "lib.catalog");
  EXPECT_EQ(feed.brokers, "f:9092");
  EXPECT_EQ(feed.transactional_id, "x");
  EXPECT_EQ(feed.progress_topic, "x.p");
  EXPECT_EQ(feed.max_messages, 10u);
  EXPECT_EQ(feed.max_message_bytes, 2048u);
  EXPECT_EQ(feed.poll_ms, 5u);
  ASSERT_EQ(feed.properties.size(), 1u);
  EXPECT_EQ(feed.properties[0].first, "linger.ms");
  // A topic for the rest too.
  const Config both = MustParse(std::string(kFeedHead) +
                                "feed: {topic: lib.docs, collections: {catalog: lib.catalog}}\n");
  EXPECT_EQ(*both.feed->TopicOf("authors"), "lib.docs");
  EXPECT_EQ(*both.feed->TopicOf("catalog"), "lib.catalog");
}

TEST(FeedConfigTest, EveryMistakeIsReported) {
  ExpectOnlyError(std::string(kFeedHead) + "feed: {brokers: b}\n", "give \"topic\"", 8, "feed");
  ExpectOnlyError(std::string(kFeedHead) + "feed: {collections: {catalogue: t}}\n",
                  "unknown collection \"catalogue\" (collections: authors, catalog) (did you "
                  "mean \"catalog\"?)",
                  8, "feed.collections.catalogue");
  ExpectOnlyError(std::string(kFeedHead) + "feed: {topic: \"no spaces\"}\n",
                  "not a valid Kafka topic name", 8, "feed.topic");
  ExpectOnlyError(std::string(kFeedHead) + "feed: {topic: t, max_message_bytes: 10}\n",
                  "an integer >= 1024", 8, "feed.max_message_bytes");
  ExpectOnlyError(std::string(kFeedHead) + "feed: {topic: t, progress_topic: t}\n",
                  "cannot also carry documents", 8, "feed");
  ExpectOnlyError(std::string(kFeedHead) + "feed: {topic: t, topics: [x]}\n",
                  "unknown key \"topics\" (did you mean \"topic\"?)", 8, "feed.topics");
  // Without source.kafka the feed names its brokers.
  ExpectOnlyError("store: {schema: lib}\nentities: [a]\nprojections: {as: {from: a}}\n"
                  "feed: {topic: t}\n",
                  "missing required key \"brokers\"", 4, "feed");
  EXPECT_FALSE(MustParse("store: {schema: lib}\nentities: [a]\nprojections: {as: {from: a}}\n"
                         "feed: {topic: t, brokers: b:1}\n")
                   .feed->brokers.empty());
}

TEST(FeedConfigTest, AFeedThatIsNotAMapIsAnErrorNotACrash) {
  // The checks made once the whole file is read have no feed to check then.
  ExpectOnlyError(std::string(kFeedHead) + "feed: 1\n", "expected a map, found the scalar \"1\"",
                  8, "feed");
  ExpectOnlyError(std::string(kFeedHead) + "feed: [x, y]\n", "expected a map, found a list", 8,
                  "feed");
}

TEST(FeedConfigTest, TheFeedsTablesAreReservedNames) {
  ExpectOnlyError(std::string(kHead) + "  outbox: {from: book}\n", "clashes with a table", 4,
                  "projections.outbox");
}

// Relations through a link entity (a join table).

constexpr char kLinkHead[] = R"(store: {schema: lib}
entities: [author, book, book_author]
projections:
  p:
    from: author
    fields:
)";

TEST(ConfigThroughTest, CountIdsAndLookupGoThroughALinkEntity) {
  const Config config = MustParse(std::string(kLinkHead) + R"(      n: {count: book, through: book_author, from: author_id, to: book_id}
      ids: {ids: book, through: book_author, from: author_id, to: book_id, limit: 5}
      books:
        lookup: book
        through: book_author
        from: author_id
        to: book_id
        select: [title]
        missing: null
)");
  const ProjectionConfig& p = config.projections[0];
  EXPECT_EQ(Derived(Field(p, 0)), "count book through book_author from author_id to book_id");
  EXPECT_EQ(Derived(Field(p, 1)), "ids book through book_author from author_id to book_id limit 5");
  EXPECT_EQ(Derived(Field(p, 2)),
            "lookup book through book_author from author_id to book_id select [title] missing null");
}

TEST(ConfigThroughTest, ErrorsSayWhatIsWrongAndWhere) {
  const std::string head = kLinkHead;
  ConfigError e = ExpectOnlyError(
      head + "      n: {count: book, through: book_authors, from: author_id, to: book_id}\n",
      "book_authors", 7, "projections.p.fields.n.through");
  EXPECT_EQ(e.place.column, 33);
  ExpectOnlyError(head + "      n: {count: book, through: book_author, to: book_id}\n",
                  "missing required key \"from\"", 7, "projections.p.fields.n.from");
  ExpectOnlyError(head + "      n: {ids: book, through: book_author, from: author_id}\n",
                  "missing required key \"to\"", 7, "projections.p.fields.n.to");
  ExpectOnlyError(head + "      n: {lookup: book, from: author_id, to: book_id}\n",
                  "missing required key \"through\"", 7, "projections.p.fields.n.through");
  e = ExpectOnlyError(
      head + "      n: {count: book, via: authorIds, through: book_author, from: a, to: b}\n",
      "\"via\" and \"through\" exclude each other", 7, "projections.p.fields.n.via");
  EXPECT_EQ(e.place.column, 29);
  ExpectOnlyError(head + "      n: {lookup: book, by: bookIds, through: book_author, from: a, to: b}\n",
                  "\"by\" and \"through\" exclude each other", 7, "projections.p.fields.n.by");
  ExpectOnlyError(head + "      n: {count: book, through: book_author, from: x, to: x}\n",
                  "\"from\" and \"to\" must be two different fields", 7,
                  "projections.p.fields.n.to");
  // Orders and limits through a link (issue 26, point 2): one order at a
  // time; none where the kind does not go through a link.
  ExpectOnlyError(head + "      n: {ids: book, through: book_author, from: a, to: b, "
                         "order_by: x, link_order_by: y}\n",
                  "\"order_by\" (a field of the linked entity) and \"link_order_by\" (a field of "
                  "the link row) exclude each other",
                  7, "projections.p.fields.n.link_order_by");
  ExpectOnlyError(head + "      n: {ids: book, via: authorIds, order_by: x}\n",
                  "\"order_by\" applies to ids through a link (through, from, to) only; via lists "
                  "ids in ascending order",
                  7, "projections.p.fields.n.order_by");
  ExpectOnlyError(head + "      n: {lookup: book, by: bookIds, link_order_by: x}\n",
                  "\"link_order_by\" applies to a lookup through a link", 7,
                  "projections.p.fields.n.link_order_by");
  ExpectOnlyError(head + "      n: {embed: book, via: authorIds, link_order_by: x}\n",
                  "\"link_order_by\" is for an embed through a link", 7,
                  "projections.p.fields.n.link_order_by");
  ExpectOnlyError(head + "      n: {lookup: book, through: book_author, from: a, to: b, "
                         "limit: 2, missing: null}\n",
                  "cannot be combined with order_by, link_order_by or limit", 7,
                  "projections.p.fields.n.missing");
  ExpectOnlyError(head + "      n: {count: book, through: book_author, from: a, to: b, "
                         "order_by: x}\n",
                  "\"order_by\" is not allowed in a count", 7, "projections.p.fields.n.order_by");
  // embed goes through a link like the others.
  ExpectOnlyError(head + "      n: {embed: book, via: authorIds, through: book_author, from: a, "
                         "to: b}\n",
                  "\"via\" and \"through\" exclude each other", 7, "projections.p.fields.n.via");
}

}  // namespace
}  // namespace denormd

namespace denormd {
namespace {

// issue 25: values `check` accepted that fail or misbehave at run time are
// refused, each with its place in the file.
TEST(ConfigBoundsTest, EveryDurationAndCountHasAnUpperBound) {
  const std::string head = std::string(kHead) + "  p: {from: book}\n";
  struct Case {
    std::string yaml;  // after head, on line 5
    std::string where;
    std::string text;
  };
  const std::vector<Case> cases = {
      {"store: {schema: lib, statement_timeout_ms: 99999999999}\n", "store.statement_timeout_ms",
       "must be at most 2147483647 (PostgreSQL's largest timeout), found 99999999999"},
      {"store: {schema: lib, lock_timeout_ms: 2147483648}\n", "store.lock_timeout_ms",
       "must be at most 2147483647"},
      {"store: {schema: lib, connect_timeout_s: 86400}\n", "store.connect_timeout_s",
       "must be at most 3600"},
      {"retention: {tombstone_hours: 99999999999}\n", "retention.tombstone_hours",
       "must be at most 876000 (100 years), found 99999999999"},
      {"retention: {dead_letter_days: 99999999}\n", "retention.dead_letter_days",
       "must be at most 36500"},
      {"retention: {max_dead_letters: 18446744073709551615}\n", "retention.max_dead_letters",
       "must be at most 9223372036854775807"},
      {"retention: {interval_s: 18446744073709551615}\n", "retention.interval_s",
       "must be at most 31536000 (a year), found 18446744073709551615"},
      {"batch: {max_events: 1000001}\n", "batch.max_events", "must be at most 1000000"},
      {"batch: {max_event_bytes: 268435457}\n", "batch.max_event_bytes", "must be at most 268435456"},
      {"batch: {max_delay_ms: 60001}\n", "batch.max_delay_ms", "must be at most 60000"},
      {"batch: {stuck_after_s: 86401}\n", "batch.stuck_after_s", "must be at most 86400"},
  };
  for (const Case& c : cases) {
    std::string yaml = head + c.yaml;
    // store replaces the head's.
    if (c.yaml.rfind("store:", 0) == 0) yaml = yaml.substr(yaml.find('\n') + 1);
    const int line = c.yaml.rfind("store:", 0) == 0 ? 4 : 5;
    SCOPED_TRACE(c.yaml);
    ExpectOnlyError(yaml, c.text, line, c.where);
  }
  // The bounds themselves are accepted.
  const Config at_bounds = MustParse(
      head + "retention: {tombstone_hours: 876000, interval_s: 31536000}\n"
             "batch: {max_events: 1000000, stuck_after_s: 86400}\n");
  EXPECT_EQ(at_bounds.retention.interval_s, 31536000u);
  EXPECT_EQ(at_bounds.batch.max_events, 1000000u);
}

TEST(ConfigBoundsTest, TheFeedsCountsAndTransactionalIdMustWork) {
  const std::string head = std::string(kFeedHead) + "feed:\n  topic: lib.docs\n";
  ExpectOnlyError(head + "  transactional_id: my relay\n",
                  "transactional_id \"my relay\" must be 1 to 249 letters, digits", 10,
                  "feed.transactional_id");
  ExpectOnlyError(head + "  transactional_id: " + std::string(245, 'r') + "\n",
                  "too long to derive the progress topic", 10, "feed.transactional_id");
  // With a progress topic of its own, a long id is fine.
  EXPECT_EQ(MustParse(head + "  transactional_id: " + std::string(245, 'r') +
                      "\n  progress_topic: p\n")
                .feed->transactional_id.size(),
            245u);
  ExpectOnlyError(head + "  max_messages: 1000001\n", "must be at most 1000000", 10,
                  "feed.max_messages");
  ExpectOnlyError(head + "  max_message_bytes: 1000000001\n", "must be at most 1000000000", 10,
                  "feed.max_message_bytes");
  ExpectOnlyError(head + "  poll_ms: 60001\n", "must be at most 60000", 10, "feed.poll_ms");
}

TEST(ConfigBoundsTest, KafkaNamesMustWorkAtRunTime) {
  const std::string tail = "store: {schema: lib}\nentities: [a]\nprojections: {p: {from: a}}\n";
  ExpectOnlyError("source:\n  kafka:\n    brokers: k:1\n    topics: [\"my topic\"]\n    group: g\n" + tail,
                  "topic \"my topic\" is not a valid Kafka topic name", 4, "source.kafka.topics[0]");
  ExpectOnlyError("source:\n  kafka:\n    brokers: k:1\n    topics: [{topic: \"a b\", format: native}]\n"
                  "    group: g\n" + tail,
                  "topic \"a b\" is not a valid Kafka topic name", 4, "source.kafka.topics[0].topic");
  ExpectOnlyError("source:\n  kafka:\n    brokers: k:1\n    topics: [t]\n    group: \"g\\nREADY=1\"\n" + tail,
                  "must not contain control characters", 5, "source.kafka.group");
  ExpectOnlyError("source:\n  kafka:\n    brokers: k:1\n    topics: [t]\n    group: g\n"
                  "    dead_letter_topic: \"dead letters\"\n" + tail,
                  "is not a valid Kafka topic name", 6, "source.kafka.dead_letter_topic");
  // Patterns stay patterns.
  EXPECT_EQ(MustParse("source:\n  kafka:\n    brokers: k:1\n    topics: [\"^app\\\\..*\"]\n    group: g\n" + tail)
                .kafka->topics.size(),
            1u);
}

}  // namespace
}  // namespace denormd

namespace denormd {
namespace {

// issue 28, item 6: a template's error points at its brace, not at the start
// of the value (quoted or plain).
TEST(ConfigErrorTest, ATemplateErrorPointsAtItsBrace) {
  const std::string quoted = "      name: \"{firstName} {lastName\"\n";
  ConfigError e = ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n" + quoted,
                                  "is not closed", 7, "projections.p.fields.name");
  EXPECT_EQ(e.place.column, static_cast<int>(quoted.find("{lastName")) + 1);
  const std::string plain = "      name: x{a}y}z\n";
  e = ExpectOnlyError(std::string(kHead) + "  p:\n    from: book\n    fields:\n" + plain,
                      "stray '}'", 7, "projections.p.fields.name");
  EXPECT_EQ(e.place.column, static_cast<int>(plain.find("}z")) + 1);
}

}  // namespace
}  // namespace denormd
