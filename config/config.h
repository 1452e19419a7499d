// The validated configuration of denormd: plain structs, parsed from YAML once.
//
// Nothing downstream of config/ sees raw YAML. LoadConfig() parses a file,
// validates every field, and either returns a Config that is safe to use as is
// (every entity type named exists, every path and template parsed, every
// collection's projections agree) or the complete list of errors, each with its
// place in the file.
//
// The language itself is documented for users in docs/configuration.md.
#ifndef DENORMD_CONFIG_CONFIG_H_
#define DENORMD_CONFIG_CONFIG_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "config/derivation_syntax.h"
#include "config/input_format_syntax.h"

namespace denormd {

// A place in the configuration file, for error messages. line and column count
// from 1; 0 means unknown.
struct ConfigPlace {
  int line = 0;
  int column = 0;
};

// One step of a path.
struct PathStep {
  enum class Kind {
    kField,      // "name" (object member)
    kIndex,      // "[3]" (array element)
    kFirstWith,  // "[]": the first array element for which the rest of the
                 // path exists; the path's value is the rest's value there.
  };
  Kind kind = Kind::kField;
  std::string field;  // kField
  size_t index = 0;   // kIndex
};

// A path into an entity: "a.b", "a[0]", "a[].b", "a[0].b[].c". At the top
// level the single step "id" means the entity's id, not a data field.
struct Path {
  std::string text;  // as written, for messages
  std::vector<PathStep> steps;
};

// A string with {path} parts: "{firstName} {lastName}". "{{" and "}}" are
// literal braces. Rendering: strings as they are, other values as compact
// JSON, null or missing as "".
struct Template {
  struct Part {
    bool is_path = false;
    std::string literal;  // when !is_path
    Path path;            // when is_path
  };
  std::string text;
  std::vector<Part> parts;
};

// order_by: "createdAt" ascending, "-createdAt" descending. Values compare as
// JSON numbers numerically, strings by bytes; entities without the field sort
// last in either direction; ties by id ascending. No order_by: by id.
struct OrderBy {
  bool present = false;
  bool descending = false;
  Path path;
};

struct Expression;

// What a relation copies from each related entity.
struct Selection {
  enum class Kind {
    kWhole,  // no select: the whole data plus "id"
    kList,   // select: [a, b]: those top-level fields, absent ones left out;
             //   "id" is the entity's id
    kMap,    // select: {name: expression}: path, template or {value: ...}
  };
  Kind kind = Kind::kWhole;
  std::vector<std::string> fields;                       // kList
  std::vector<std::pair<std::string, Expression>> map;   // kMap, in file order
};

// A field's value in a projection document, or a select-map entry.
struct Expression {
  enum class Kind {
    kPath,      // "a.b"
    kTemplate,  // "{a} {b}" (any string containing "{")
    kValue,     // {value: <any YAML>}
    kDerived,   // {count: ...}, {embed: ...}, ...: a derivation kind's map
                // (projections/derivations/); never inside a select map
  };

  Kind kind = Kind::kPath;
  ConfigPlace place;

  Path path;                // kPath
  Template template_;       // kTemplate
  std::string value_json;   // kValue: the literal as compact JSON text

  std::string derivation;                       // kDerived: the kind's name
  std::shared_ptr<const DerivationSpec> spec;   // kDerived: what the kind parsed
};

// One projection: a set of documents in one collection.
struct ProjectionConfig {
  enum class Kind {
    kEntity,   // from: T - one document per live entity of T
    kBuckets,  // buckets: T - T's entities grouped by a field, `size` a document
  };

  std::string name;        // the key under projections:
  std::string collection;  // table name; defaults to name
  Kind kind = Kind::kEntity;
  ConfigPlace place;

  // kEntity
  std::string from;
  bool has_include = false;
  std::vector<std::string> include;  // top-level source fields to keep
  std::vector<std::string> exclude;  // top-level source fields to drop
  std::vector<std::pair<std::string, Expression>> fields;  // in file order
  std::string partition_key;  // document field copied into the pk column; "" = none
  // Several projections write this collection (a mixed-type collection): its
  // documents are keyed on (pk, id), as in the article's model, not on id.
  bool shared_collection = false;

  // kBuckets: {"id": "<value>:<n>", "<by>": <value>, "seq": <n>, "<field>": [...]}
  enum class BucketLayout {
    kStable,  // members stay in their bucket; B-tree fill (the default)
    kPacked,  // bucket n holds members size*n .. size*n+size-1
  };
  std::string buckets;      // the grouped entity type
  Path by;                  // grouping field (only string values group)
  uint64_t size = 100;      // entities per document, >= 1
  OrderBy order_by;
  std::string field = "items";
  Selection select;
  BucketLayout layout = BucketLayout::kStable;
};

// One entry of source.kafka.topics: a topic name, or a pattern (starting with
// '^', an ECMAScript regular expression matched against the whole topic name;
// librdkafka subscribes to every matching topic), and its input format
// (docs/configuration.md, "Input formats").
struct TopicInput {
  std::string topic;
  ConfigPlace place;
  // The format its records are read in: the one `format` names, else the
  // default (the first of ConfigSyntax::formats, native). One of the
  // ConfigSyntax's, which outlive every Config (the built-in ones live as
  // long as the program). Set by the parser; null in a hand-made Config
  // means the default.
  const InputFormatSyntax* format = nullptr;
  // What the format read from its keys (its header in formats/ says what);
  // set with `format`.
  std::shared_ptr<const InputSettings> settings;

  bool IsPattern() const { return !topic.empty() && topic[0] == '^'; }
};

struct KafkaSourceConfig {
  std::string brokers;               // required when kafka is given
  std::vector<std::string> topics;   // required, non-empty: the names (or patterns)
  std::vector<TopicInput> inputs;    // one per entry of `topics`, in the same order
  std::string group;                 // required
  std::string dead_letter_topic;     // optional; "" = table only
  // Extra librdkafka consumer properties (e.g. session.timeout.ms), applied
  // after denormd's own; in file order. Checked by librdkafka at start-up.
  std::vector<std::pair<std::string, std::string>> properties;
};

struct StoreConfig {
  std::string postgres;  // libpq connection string or URL; DENORMD_POSTGRES overrides
  std::string schema;    // required, a valid SQL identifier
  // A connection attempt gives up after this long (libpq connect_timeout;
  // TCP keepalives are on too, so a server that vanishes is noticed).
  uint64_t connect_timeout_s = 10;
  // A statement (or a wait for a lock) is cancelled after this long; the
  // batch then rolls back and is retried. 0 = no limit.
  uint64_t statement_timeout_ms = 300000;
  uint64_t lock_timeout_ms = 60000;
};

struct BatchConfig {
  uint64_t max_events = 5000;   // events per transaction, >= 1
  // The longest `run` keeps adding records that are already fetched to a
  // batch that has one; it never waits for records that have not arrived.
  uint64_t max_delay_ms = 50;
  // The largest record accepted, in bytes (a Kafka message value or a log
  // line); larger ones become dead letters holding their first 64 KiB, and a
  // log line over it is never held in memory whole. >= 1024.
  uint64_t max_event_bytes = 1 << 20;
  // `run`: a batch blocked this long inside the store or the source (a
  // statement waiting on a lock, a hung server) makes /healthz answer 503
  // "batch stuck"; a stop request cancels its statement after kStopGraceMs.
  // >= 1.
  uint64_t stuck_after_s = 60;
  // `run`: the most lanes (projections/lanes.h: the model's parts that share
  // no document, each applied by batches of its own, beside the others on a
  // connection of its own); 1 applies every part in one batch. 1..64.
  uint64_t max_lanes = 4;
};

// The change feed: every committed document change of the published
// collections, produced to Kafka exactly once, in commit order per key, by the
// relay (`denormd run`, or `denormd relay` on its own) from the outbox that
// batches write in their own transaction. docs/architecture.md, "The change
// feed", has the protocol.
struct FeedConfig {
  std::string brokers;  // default: source.kafka.brokers; DENORMD_FEED_BROKERS overrides
  // The topic of every collection not listed in `collections`; "" = only
  // the listed collections are published.
  std::string topic;
  // Collection -> topic, in file order (each a collection of the config).
  std::vector<std::pair<std::string, std::string>> collections;
  // The relay's Kafka transactional.id, also the key of its progress
  // records; default "denormd-feed-<schema>". Relays of one store share it
  // (only one runs; a newer one fences an older one).
  std::string transactional_id;
  // Where the relay's progress commits with each Kafka transaction: a
  // compacted topic of one partition (created when missing); default
  // "<transactional_id>.progress".
  std::string progress_topic;
  uint64_t max_messages = 1000;           // document changes per Kafka transaction, >= 1
  // A change whose message (key, value, headers) would be larger is
  // published as a small marker instead (docs/configuration.md). >= 1024.
  uint64_t max_message_bytes = 1000000;
  uint64_t poll_ms = 20;                   // how often an idle relay looks at the outbox
  // Extra librdkafka producer properties, applied after denormd's own.
  std::vector<std::pair<std::string, std::string>> properties;

  // The topic changes of `collection` go to; nullptr when not published.
  const std::string* TopicOf(const std::string& collection) const;
};

// What `denormd prune` (and `run`, every interval_s) removes: state the
// engine no longer needs. 0 turns a rule off.
struct RetentionConfig {
  // A deleted entity's tombstone (its last version) is what refuses an older
  // event that arrives after the delete; past this age it is removed, and an
  // event older than the delete arriving later would bring the entity back.
  // Keep it above the longest time an event can be redelivered (Kafka's
  // default topic retention is 7 days).
  uint64_t tombstone_hours = 168;
  uint64_t dead_letter_days = 30;      // dead letters received longer ago are removed
  uint64_t max_dead_letters = 100000;  // beyond this many, the oldest are removed
  // How often `denormd run` prunes, beside the batches (0 = never; `denormd
  // prune` still does). Unlocked lock rows and zero counters are removed too:
  // the lock table holds a row per key written since the last prune, so this
  // bounds it (with the former default, 3,600 s, it doubled in a 6-minute
  // trial of bench/run.py --soak-minutes; docs/benchmarks.md, "Soak").
  uint64_t interval_s = 300;
};

// Thresholds of what a model may cost: `denormd advise` recommends a change
// past them (docs/configuration.md, "Choosing a model").
struct LimitsConfig {
  // An `ids` or `embed` without `limit` whose largest document holds more
  // members than this.
  uint64_t max_members = 1000;
  // A `lookup` whose member is copied into more documents than this: each
  // change of it rewrites them all.
  uint64_t fanout_warn = 1000;
  // A document larger than this (or than the feed's max_message_bytes).
  uint64_t max_document_bytes = 1048576;
  // Buckets: a typical group (p50) spread over more bucket documents than
  // this.
  uint64_t max_bucket_pages = 50;
};

// How every command logs (common/log.h). The command line (-v, -q,
// --log-format) and $DENORMD_LOG_FORMAT override these.
struct LogConfig {
  LogLevel level = LogLevel::kInfo;     // lines below it are dropped
  LogFormat format = LogFormat::kText;  // text (key=value) or json lines
};

struct Config {
  std::string path;  // the file it was read from
  // The YAML text it was parsed from (WithModel re-reads it); may hold
  // secrets: never log or store it.
  std::string source_text;
  // The model: the `entities` and `projections` sections as YAML, emitted
  // from the parsed file (comments and layout dropped). The store records
  // it (`denormd apply`); it holds no connection settings.
  std::string model_yaml;
  std::optional<KafkaSourceConfig> kafka;
  StoreConfig store;
  BatchConfig batch;
  std::optional<FeedConfig> feed;
  RetentionConfig retention;
  LimitsConfig limits;
  LogConfig log;
  std::vector<std::string> entities;
  std::vector<ProjectionConfig> projections;  // in file order

  bool HasEntity(const std::string& type) const;
  // The distinct collection (table) names of the projections, ascending.
  std::vector<std::string> CollectionNames() const;
  const ProjectionConfig* FindProjection(const std::string& name) const;
  // The collections whose document changes go to the change feed, ascending
  // (none without `feed`).
  std::vector<std::string> PublishedCollections() const;
  // Whether a projection of `collection` declares a partition_key (the
  // feed's message key then holds it).
  bool HasPartitionKey(const std::string& collection) const;
};

struct ConfigError {
  ConfigPlace place;
  std::string where;    // dotted location: "projections.books.fields.authors.by"
  std::string message;  // what is wrong

  // "FILE:LINE:COLUMN: WHERE: MESSAGE"
  std::string ToString(const std::string& file) const;
};

// What the parser knows beyond its own sections: the derivation kinds a
// projection's fields may use and the input formats a topic may have. The
// engine's are BuiltinConfigSyntax() (formats/format_registry.h, which also
// offers LoadConfig/ParseConfig/WithModel without this argument); the objects
// listed must outlive every Config parsed with them.
struct ConfigSyntax {
  DerivationSyntaxes derivations;
  InputFormatSyntaxes formats;  // never empty: the first is the default
};

// Parses and validates with `syntax`. On success `errors` is empty. On
// failure `errors` holds every problem found (not just the first), in file
// order where known. Never throws.
std::optional<Config> LoadConfig(const std::string& file, const ConfigSyntax& syntax,
                                 std::vector<ConfigError>* errors);
std::optional<Config> ParseConfig(const std::string& yaml_text, const std::string& file,
                                  const ConfigSyntax& syntax, std::vector<ConfigError>* errors);

// Canonical one-line forms (see DerivationSpec::Normalized): a selection
// ("" for the whole entity, "select [a, b]", "select {n: expr, ...}"), an
// order ("order_by -createdAt", "" when absent) and any expression.
std::string NormalizedSelection(const Selection& selection);
std::string NormalizedOrderBy(const OrderBy& order_by);
std::string NormalizedExpression(const Expression& expression);

// The settings that differ between `before` and `after`, by dotted name, in
// the order of the sections (source, store, batch, retention, limits, feed, log,
// entities, projections): "source.kafka.brokers",
// "source.kafka.topics.<topic>" (its format or the format's settings),
// "store.schema", "batch.max_events", "feed.properties",
// "retention.interval_s", "log.level", "entities", "projections.books" (one name per projection
// added, removed or changed in meaning; a projection's place in the file and
// the spelling of its derivations do not count). `path` is ignored. Empty
// when the two configurations mean the same.
std::vector<std::string> ConfigChanges(const Config& before, const Config& after);

// The model's meaning in canonical text: the entity types, then each
// projection (by name) in NormalizedProjection form, one per line. Equal for
// equal meaning, whatever the file's layout, order or spelling.
std::string NormalizedModel(const Config& config);
// A short stable digest of NormalizedModel (16 hex digits).
std::string ModelFingerprint(const Config& config);
// The canonical form of one projection (as in NormalizedModel).
std::string NormalizedProjectionText(const ProjectionConfig& projection);

// `base` with its model (entities and projections) replaced by `model_yaml`
// (a Config::model_yaml, as the store records it): the file is parsed again
// with those sections swapped in, so every cross-check (the feed's
// collections, the topics' entity types) is made again. Every other setting,
// overrides included, is `base`'s. `origin` names the model in errors
// ("the store's projections, epoch 3"). With `without_feed` the result has
// no change feed (and the feed's collections are not checked against the
// model).
std::optional<Config> WithModel(const Config& base, const std::string& model_yaml,
                                const std::string& origin, const ConfigSyntax& syntax,
                                std::vector<ConfigError>* errors, bool without_feed = false);

// Path and template syntax, shared by the parser and by tests. InvalidInput
// with what is wrong and where on bad syntax.
Status ParsePath(const std::string& text, Path* out);
// On a template error, *error_at (when given) is the index in `text` of the
// character it is about: the stray '}', or the '{' that opens the bad path.
Status ParseTemplate(const std::string& text, Template* out, size_t* error_at = nullptr);

}  // namespace denormd

#endif  // DENORMD_CONFIG_CONFIG_H_
