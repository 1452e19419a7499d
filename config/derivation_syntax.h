// The seam between the configuration parser and the derivation kinds.
//
// A field of an entity projection is either a scalar expression (a path, a
// "{template}" string or {value: ...}), which config/ parses itself, or a
// derivation such as {count: book, via: authorIds}: a map with exactly one key
// naming its kind. config/ knows no derivation kind. It finds the kind by that
// key among the DerivationSyntax objects it is given, hands the kind an
// ExpressionReader over the map, and stores what the kind returns (a
// DerivationSpec) in the Expression, opaque. The kinds themselves, with their
// parsing, planning, reading and rendering, live in projections/derivations/,
// one file each.
//
// Nothing here exposes YAML: a kind reads typed values through the reader,
// which reports every problem with its place in the file.
#ifndef DENORMD_CONFIG_DERIVATION_SYNTAX_H_
#define DENORMD_CONFIG_DERIVATION_SYNTAX_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace denormd {

struct Path;
struct OrderBy;
struct Selection;

// What a derivation kind parsed from its keys. Defined by the kind; config/
// only stores it. Immutable once parsed.
class DerivationSpec {
 public:
  virtual ~DerivationSpec() = default;
  // The derivation in one canonical line, equal for equal meaning whatever
  // the spelling: "embed comment via postId order_by -createdAt limit 3
  // select [id, author, comment]". Used to compare configs and in messages.
  virtual std::string Normalized() const = 0;
};

// Typed reads of the keys of one derivation map. Every Read* reports what is
// wrong, with the key's place, and returns false; the kind then returns null.
// Valid while DerivationSyntax::Parse runs.
class ExpressionReader {
 public:
  virtual ~ExpressionReader() = default;

  // The entity type of the projection this field belongs to ("book").
  virtual const std::string& root_type() const = 0;
  // Whether the map has `key` (one of DerivationSyntax::keys()).
  virtual bool Has(const std::string& key) const = 0;
  // A declared entity type (checked against `entities`).
  virtual bool ReadEntityType(const std::string& key, std::string* out) = 0;
  // A required path ("authorIds", "a[].b"); reports a missing key.
  virtual bool ReadPath(const std::string& key, Path* out) = 0;
  // "createdAt" or "-createdAt".
  virtual bool ReadOrderBy(const std::string& key, OrderBy* out) = 0;
  // An integer >= min, and at most 2,147,483,647 (what PostgreSQL reads as
  // an integer).
  virtual bool ReadUint(const std::string& key, uint64_t min, uint64_t* out) = 0;
  // select: a list of field names or a map of name: scalar expression.
  virtual bool ReadSelection(const std::string& key, Selection* out) = 0;
  // One of `choices` (a YAML null reads as "null").
  virtual bool ReadChoice(const std::string& key, const std::vector<std::string>& choices,
                          std::string* out) = 0;
  // Reports a problem at `key` (or at the map when `key` is absent).
  virtual void Error(const std::string& key, const std::string& message) = 0;
};

// How one derivation kind is written: its name (the key that selects it) and
// the keys it allows, and how to parse them.
class DerivationSyntax {
 public:
  virtual ~DerivationSyntax() = default;
  // The key naming the kind, e.g. "count".
  virtual const std::string& name() const = 0;
  // Every key the map may hold, the name included.
  virtual const std::vector<std::string>& keys() const = 0;
  // The parsed derivation, or null after reporting through `reader`.
  virtual std::shared_ptr<const DerivationSpec> Parse(ExpressionReader& reader) const = 0;
};

// The kinds a parser knows, in the order `check` lists them.
using DerivationSyntaxes = std::vector<const DerivationSyntax*>;

}  // namespace denormd

#endif  // DENORMD_CONFIG_DERIVATION_SYNTAX_H_
