// The seam between the configuration parser and the input formats.
//
// An entry of source.kafka.topics is a topic name, read in the default
// format (native), or a map {topic, format, <the format's own keys>}. config/
// knows no format: it finds the one that `format` names among the
// InputFormatSyntax objects it is given, reports every key of the map that
// belongs to another format, hands the format a TopicReader over the map, and
// stores what the format returns (its InputSettings) in the TopicInput,
// opaque. The formats themselves, with their keys, decoders and version
// rules, live in formats/, one file each, listed in formats/format_registry.cc.
//
// Nothing here exposes YAML: a format reads typed values through the reader,
// which reports every problem with its place in the file.
#ifndef DENORMD_CONFIG_INPUT_FORMAT_SYNTAX_H_
#define DENORMD_CONFIG_INPUT_FORMAT_SYNTAX_H_

#include <memory>
#include <string>
#include <vector>

namespace denormd {

// What a format parsed from its keys for one topic. Defined by the format;
// config/ only stores it. Immutable once parsed.
class InputSettings {
 public:
  virtual ~InputSettings() = default;
  // The settings in one canonical line, equal for equal meaning (""
  // for a format without keys). ConfigChanges compares topics with it.
  virtual std::string Normalized() const = 0;
};

// Typed reads of one topic map's keys. Every Read* reports what is wrong,
// with the key's place, and returns false; the format then returns null.
// Valid while InputFormatSyntax::Parse runs.
class TopicReader {
 public:
  virtual ~TopicReader() = default;

  // The topic name or pattern, as written (its key is "topic").
  virtual const std::string& topic() const = 0;
  // Whether it is a pattern (starts with '^').
  virtual bool is_pattern() const = 0;
  // Whether the map has `key` (one of InputFormatSyntax::keys()).
  virtual bool Has(const std::string& key) const = 0;
  // A string; reports a missing key.
  virtual bool ReadString(const std::string& key, std::string* out) = 0;
  // A declared entity type (checked against `entities`).
  virtual bool ReadEntityType(const std::string& key, std::string* out) = 0;
  // A non-empty list of distinct non-empty strings; a repeated one is
  // reported as `<what> "x" is listed twice`.
  virtual bool ReadDistinctList(const std::string& key, const std::string& what,
                                std::vector<std::string>* out) = 0;
  // Whether the `entities` section was read (false when it is missing or
  // broken: its own error is enough, so skip checks against it), and whether
  // `type` is one of them.
  virtual bool entity_types_known() const = 0;
  virtual bool IsEntityType(const std::string& type) const = 0;
  // Reports a problem at `key` ("topic" included; at the map when the key is
  // absent).
  virtual void Error(const std::string& key, const std::string& message) = 0;
};

// How one input format is written: its name (the value of `format`) and the
// keys it adds to a topic map, and how to parse them.
class InputFormatSyntax {
 public:
  virtual ~InputFormatSyntax() = default;
  // The value of `format` naming it, e.g. "debezium".
  virtual const std::string& name() const = 0;
  // The keys it allows besides "topic" and "format"; none may be one of
  // those two. Another format may allow the same key.
  virtual const std::vector<std::string>& keys() const = 0;
  // The topic's settings, or null after reporting through `reader`.
  virtual std::shared_ptr<const InputSettings> Parse(TopicReader& reader) const = 0;
};

// The formats a parser knows, in the order messages list them; the first is
// the default, the format of a topic given by name alone. Never empty.
using InputFormatSyntaxes = std::vector<const InputFormatSyntax*>;

}  // namespace denormd

#endif  // DENORMD_CONFIG_INPUT_FORMAT_SYNTAX_H_
