// Expressions (config_sections.h): a projection's fields and select maps
// (paths, "{templates}", {value: ...} and the derivation kinds' maps, read
// through the YamlExpressionReader), and the path and template syntax
// (config.h: ParsePath, ParseTemplate).
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include "config/config_sections.h"

namespace denormd {
namespace config_internal {
namespace {

// The largest count a derivation takes (an embed's or ids' `limit`).
constexpr uint64_t kMaxDerivationCount = 2147483647;

// The names of the expression kinds ("value" and every derivation kind).
KeyList KindNames(const DerivationSyntaxes& kinds) {
  KeyList names = {"value"};
  for (const DerivationSyntax* syntax : kinds) names.push_back(syntax->name());
  return names;
}

// Every key any expression kind allows.
KeyList ExpressionKeys(const DerivationSyntaxes& kinds) {
  KeyList keys = {"value"};
  for (const DerivationSyntax* syntax : kinds) {
    for (const std::string& key : syntax->keys()) {
      if (!Contains(keys, key)) keys.push_back(key);
    }
  }
  return keys;
}

// The ExpressionReader a derivation kind parses its map with: typed reads of
// the keys, each problem reported with its place.
class YamlExpressionReader : public ExpressionReader {
 public:
  YamlExpressionReader(ConfigReader* reader, const Item& item, std::map<std::string, Item> keys,
                       const std::string& root_type)
      : reader_(reader), keys_(reader, item, std::move(keys)), root_type_(root_type) {}

  const std::string& root_type() const override { return root_type_; }
  bool Has(const std::string& key) const override { return keys_.Has(key); }
  bool ReadEntityType(const std::string& key, std::string* out) override {
    const Item* item = keys_.Require(key);
    return item && reader_->ReadEntityType(*item, out);
  }
  bool ReadPath(const std::string& key, Path* out) override {
    const Item* item = keys_.Require(key);
    return item && reader_->ReadPath(*item, out);
  }
  bool ReadOrderBy(const std::string& key, OrderBy* out) override {
    const Item* item = keys_.Require(key);
    return item && reader_->ReadOrderBy(*item, out);
  }
  bool ReadUint(const std::string& key, uint64_t min, uint64_t* out) override {
    // A derivation's counts (`limit`) reach PostgreSQL as integers.
    const Item* item = keys_.Require(key);
    return item && reader_->ReadBoundedUint(*item, min, kMaxDerivationCount,
                                            "a count PostgreSQL reads as a 32-bit integer", out);
  }
  bool ReadSelection(const std::string& key, Selection* out) override {
    const Item* item = keys_.Require(key);
    return item && config_internal::ReadSelection(*reader_, *item, out);
  }
  bool ReadChoice(const std::string& key, const std::vector<std::string>& choices,
                  std::string* out) override {
    const Item* item = keys_.Require(key);
    if (!item) return false;
    const std::string text = item->node.IsNull() ? "null"
                             : item->node.IsScalar() ? item->node.Scalar()
                                                     : "";
    if (Contains(choices, text)) {
      *out = text;
      return true;
    }
    reader_->Error(*item,
                   key + " must be " + JoinChoices(choices) + ", found " + Describe(item->node));
    return false;
  }
  void Error(const std::string& key, const std::string& message) override {
    keys_.Error(key, message);
  }

 private:
  ConfigReader* reader_;
  MapKeys keys_;
  const std::string& root_type_;
};

// A derivation map: its keys checked against the kind's, then parsed by the kind.
bool ReadDerivation(ConfigReader& reader, const Item& item, const DerivationSyntax& kind,
                    const std::string& root_type, Expression* out) {
  const size_t errors_before = reader.error_count();
  const char first = kind.name().empty() ? 'x' : kind.name()[0];
  const std::string article = std::strchr("aeiou", first) != nullptr ? "an " : "a ";
  YamlExpressionReader expression_reader(
      &reader, item,
      reader.ReadKeys(item, kind.keys(), article + kind.name(), ExpressionKeys(reader.kinds())),
      root_type);
  out->kind = Expression::Kind::kDerived;
  out->derivation = kind.name();
  out->spec = kind.Parse(expression_reader);
  return out->spec != nullptr && reader.error_count() == errors_before;
}

}  // namespace

bool ReadExpression(ConfigReader& reader, const Item& item, bool in_select,
                    const std::string& root_type, Expression* out) {
  out->place = item.place;
  if (item.node.IsScalar()) {
    const std::string& text = item.node.Scalar();
    const bool is_template = text.find('{') != std::string::npos;
    out->kind = is_template ? Expression::Kind::kTemplate : Expression::Kind::kPath;
    size_t error_at = 0;
    const Status status = is_template ? ParseTemplate(text, &out->template_, &error_at)
                                      : ParsePath(text, &out->path);
    if (status.ok()) return true;
    ConfigPlace place = item.place;
    // A template's error points at its brace: past the opening quote of a
    // quoted scalar (tag "!"), on the scalar's line (a one-line scalar).
    if (is_template && place.line > 0 && text.find('\n') == std::string::npos) {
      place.column += static_cast<int>(error_at) + (item.node.Tag() == "!" ? 1 : 0);
    }
    reader.Error(place, item.where, status.message());
    return false;
  }
  if (!item.node.IsMap()) {
    reader.Error(item,
                 "expected a path, a \"{template}\" string or a map such as {value: ...}, found " +
                     Describe(item.node));
    return false;
  }
  const KeyList kind_names = KindNames(reader.kinds());
  KeyList kinds;
  for (const auto& pair : item.node) {
    if (pair.first.IsScalar() && Contains(kind_names, pair.first.Scalar())) {
      kinds.push_back(pair.first.Scalar());
    }
  }
  if (kinds.size() != 1) {
    // {firstName} unquoted is YAML for the map {firstName: null}.
    const bool looks_like_template =
        kinds.empty() && item.node.size() == 1 && item.node.begin()->second.IsNull();
    if (!looks_like_template) reader.ReadKeys(item, ExpressionKeys(reader.kinds()));
    if (kinds.empty()) {
      reader.Error(item, "an expression map needs one of " + JoinKeys(kind_names) +
                             (looks_like_template ? " (a template must be quoted: \"{...}\")"
                                                  : ""));
    } else {
      reader.Error(item,
                   "give exactly one of " + JoinKeys(kind_names) + ", found " + JoinKeys(kinds));
    }
    return false;
  }
  const std::string& kind = kinds[0];
  if (in_select && kind != "value") {
    reader.Error(item, "a select map holds only paths, templates and {value: ...}; " +
                           Quote(kind) + " is not allowed here");
    return false;
  }
  for (const DerivationSyntax* syntax : reader.kinds()) {
    if (syntax->name() == kind) return ReadDerivation(reader, item, *syntax, root_type, out);
  }
  const size_t errors_before = reader.error_count();
  const auto keys = reader.ReadKeys(item, {"value"}, "a value", ExpressionKeys(reader.kinds()));
  out->kind = Expression::Kind::kValue;
  const Status json = AppendJson(keys.at("value").node, &out->value_json);
  if (!json.ok()) reader.Error(keys.at("value"), json.message());
  return reader.error_count() == errors_before;
}

bool ReadSelection(ConfigReader& reader, const Item& item, Selection* out) {
  if (item.node.IsSequence()) {
    out->kind = Selection::Kind::kList;
    return reader.ReadStringList(item, false, &out->fields);
  }
  if (!item.node.IsMap()) {
    reader.Error(item,
                 "select must be a list of field names or a map of name: expression, found " +
                     Describe(item.node));
    return false;
  }
  out->kind = Selection::Kind::kMap;
  bool ok = true;
  for (const Entry& entry : reader.Entries(item)) {
    Expression expression;
    if (entry.key.empty()) {
      reader.Error(entry.key_place, entry.value.where, "a field name must not be empty");
      ok = false;
    } else if (ReadExpression(reader, entry.value, true, "", &expression)) {
      out->map.emplace_back(entry.key, std::move(expression));
    } else {
      ok = false;
    }
  }
  return ok;
}

}  // namespace config_internal

// ----------------------------------------------------------------------------
// Path and template syntax.

namespace {

using config_internal::Quote;

// A character that may appear in a path's field name: anything but the
// path and template punctuation and ASCII whitespace.
bool IsFieldNameChar(char c) {
  return std::strchr(".[]{}", c) == nullptr && !std::isspace(static_cast<unsigned char>(c));
}

Status Fail(const std::string& text, const std::string& kind, const std::string& reason) {
  return Status::InvalidInput("bad " + kind + " " + Quote(text) + ": " + reason);
}

}  // namespace

Status ParsePath(const std::string& text, Path* out) {
  Path path;
  path.text = text;
  if (text.empty()) return Fail(text, "path", "the path is empty");
  size_t i = 0;
  while (true) {
    const size_t start = i;
    while (i < text.size() && IsFieldNameChar(text[i])) ++i;
    const std::string at = " at character " + std::to_string(i + 1);
    if (i == start) {
      if (i < text.size() && text[i] == '[') {
        return Fail(text, "path", "'[' must follow a field name" + at);
      }
      if (i == text.size() || text[i] == '.') {
        return Fail(text, "path", "empty field name" + at);
      }
      return Fail(text, "path", "unexpected " + Quote(std::string(1, text[i])) + at);
    }
    PathStep field;
    field.field = text.substr(start, i - start);
    path.steps.push_back(std::move(field));
    while (i < text.size() && text[i] == '[') {
      const size_t close = text.find(']', i);
      if (close == std::string::npos) {
        return Fail(text, "path", "'[' at character " + std::to_string(i + 1) + " is not closed");
      }
      const std::string inside = text.substr(i + 1, close - i - 1);
      PathStep step;
      if (inside.empty()) {
        step.kind = PathStep::Kind::kFirstWith;
        if (close + 1 >= text.size() || text[close + 1] != '.') {
          return Fail(text, "path", "'[]' must be followed by '.field' (the field to look for)");
        }
      } else {
        const bool digits = std::all_of(inside.begin(), inside.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c));
        });
        errno = 0;
        step.kind = PathStep::Kind::kIndex;
        step.index = digits ? std::strtoull(inside.c_str(), nullptr, 10) : 0;
        if (!digits || errno == ERANGE) {
          return Fail(text, "path", "index " + Quote(inside) + " at character " +
                                        std::to_string(i + 1) + " is not a non-negative integer");
        }
      }
      path.steps.push_back(std::move(step));
      i = close + 1;
    }
    if (i == text.size()) break;
    if (text[i] != '.') {
      return Fail(text, "path",
                  "unexpected " + Quote(std::string(1, text[i])) + " at character " +
                      std::to_string(i + 1));
    }
    ++i;
  }
  *out = std::move(path);
  return Status::Ok();
}

Status ParseTemplate(const std::string& text, Template* out, size_t* error_at) {
  Template result;
  result.text = text;
  std::string literal;
  const auto flush = [&result, &literal]() {
    if (literal.empty()) return;
    Template::Part part;
    part.literal = std::move(literal);
    result.parts.push_back(std::move(part));
    literal.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool doubled = i + 1 < text.size() && text[i + 1] == c;
    if ((c == '{' || c == '}') && doubled) {
      literal.push_back(c);
      ++i;
    } else if (c == '}') {
      if (error_at != nullptr) *error_at = i;
      return Fail(text, "template",
                  "stray '}' at character " + std::to_string(i + 1) + " (write '}}' for a brace)");
    } else if (c == '{') {
      if (error_at != nullptr) *error_at = i;
      const size_t close = text.find('}', i);
      if (close == std::string::npos) {
        return Fail(text, "template",
                    "'{' at character " + std::to_string(i + 1) + " is not closed");
      }
      Template::Part part;
      part.is_path = true;
      const Status path = ParsePath(text.substr(i + 1, close - i - 1), &part.path);
      if (!path.ok()) return Fail(text, "template", path.message());
      flush();
      result.parts.push_back(std::move(part));
      i = close;
    } else {
      literal.push_back(c);
    }
  }
  flush();
  *out = std::move(result);
  return Status::Ok();
}

}  // namespace denormd
