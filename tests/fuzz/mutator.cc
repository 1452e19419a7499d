#include "tests/fuzz/mutator.h"

#include <algorithm>
#include <utility>

namespace denormd {
namespace fuzz {

InputMutator::InputMutator(uint64_t seed, std::vector<std::string> tokens)
    : random_(seed), tokens_(std::move(tokens)) {}

std::string InputMutator::Mutate(const std::string& input, const std::string& other,
                                 size_t max_bytes) {
  std::string data = input;
  const size_t rounds = 1 + Below(4);
  for (size_t i = 0; i < rounds; ++i) MutateOnce(&data, other);
  if (data.size() > max_bytes) data.resize(max_bytes);
  return data;
}

void InputMutator::MutateOnce(std::string* data, const std::string& other) {
  static const char kInteresting[] = {'\0', '\x7f', '\xff', '\xc3', '\xed', '"', '\\', '{', '}',
                                      '[',  ']',    ',',    ':',    '\n',   '\r', ' ', '-', '0',
                                      '9',  'e',    '.',    '\t',   '#',    '&', '*', '!'};
  const size_t kinds = 8;
  const size_t kind = Below(kinds);
  if (data->empty() && kind < 6) {
    *data = tokens_.empty() ? std::string("{") : tokens_[Below(tokens_.size())];
    return;
  }
  switch (kind) {
    case 0: {  // flip a bit
      size_t at = Below(data->size());
      (*data)[at] = static_cast<char>((*data)[at] ^ (1 << Below(8)));
      break;
    }
    case 1: {  // an interesting byte
      (*data)[Below(data->size())] = kInteresting[Below(sizeof(kInteresting))];
      break;
    }
    case 2: {  // delete a range
      size_t at = Below(data->size());
      size_t length = 1 + Below(std::min<size_t>(data->size() - at, 16));
      data->erase(at, length);
      break;
    }
    case 3: {  // duplicate a range in place (repeats keys, nests deeper)
      size_t at = Below(data->size());
      size_t length = 1 + Below(std::min<size_t>(data->size() - at, 64));
      std::string copy = data->substr(at, length);
      size_t repeats = 1 + Below(Below(8) == 0 ? 200 : 3);
      std::string inserted;
      for (size_t i = 0; i < repeats; ++i) inserted += copy;
      data->insert(at, inserted);
      break;
    }
    case 4: {  // truncate
      data->resize(Below(data->size()));
      break;
    }
    case 5: {  // replace a digit run or a quoted word with a token
      size_t at = Below(data->size());
      size_t end = at;
      while (end < data->size() && std::isalnum(static_cast<unsigned char>((*data)[end]))) ++end;
      data->replace(at, end - at, tokens_.empty() ? "" : tokens_[Below(tokens_.size())]);
      break;
    }
    case 6: {  // insert a token
      if (tokens_.empty()) break;
      data->insert(Below(data->size() + 1), tokens_[Below(tokens_.size())]);
      break;
    }
    default: {  // splice: a prefix of this with a suffix of the other input
      if (other.empty()) break;
      size_t keep = Below(data->size() + 1);
      size_t from = Below(other.size());
      *data = data->substr(0, keep) + other.substr(from);
      break;
    }
  }
}

std::vector<std::string> JsonTokens() {
  return {"\"type\"", "\"id\"", "\"op\"", "\"version\"", "\"data\"", "\"upsert\"",
          "\"delete\"", "\"patch\"", "\"author\"", "\"book\"", "\"post\"", "\"comment\"",
          "\"authorIds\"", "\"postId\"", "\"createdAt\"", "null", "true", "false", "0", "-0",
          "1e999", "-1e999", "18446744073709551615", "18446744073709551616", "-1", "1.5",
          "9007199254740993", "\"\\u0000\"", "\"\\ud800\"", "\"\\udc00\\ud800\"", "\"\\\"\"",
          "\"\xc3\x28\"", "\"\xf0\x9f\x98\x80\"", "\xef\xbb\xbf", "[", "]", "{", "}", ",", ":",
          "[[[[[[[[[[[[[[[[", "{\"a\":{\"a\":{\"a\":{\"a\":", "[]", "{}", "\"\"",
          "\"" + std::string(600, 'x') + "\"", "\r\n"};
}

std::vector<std::string> YamlTokens() {
  return {"source:", "kafka:", "store:", "schema:", "batch:", "retention:", "entities:",
          "projections:", "from:", "buckets:", "by:", "size:", "order_by:", "field:",
          "select:", "layout:", "fields:", "include:", "exclude:", "partition_key:",
          "collection:", "count:", "ids:", "via:", "lookup:", "embed:", "children:",
          "limit:", "missing:", "value:", "stable", "packed", "-createdAt", "a[0].b",
          "images[].thumbnail", "\"{firstName} {lastName}\"", "\"{\"", "\"}\"", "{", "}",
          "[", "]", ": ", "- ", "? ", "&anchor ", "*anchor", "<<: *anchor", "!!binary ",
          "!!int ", "|", ">", "\t", "\n  ", "\n    ", "~", "null", "0", "-1",
          "18446744073709551616", "1e999", "yes", "'quoted'", "\"\\u0000\"", "#",
          "[[[[[[[[[[[[[[[[", "{a: {a: {a: {a: ", "%YAML 1.2\n", "---\n", "...\n"};
}

}  // namespace fuzz
}  // namespace denormd
