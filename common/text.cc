#include "common/text.h"

#include <cstdio>

namespace denormd {

std::string Joined(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}

std::string FormatCount(uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string CountOf(uint64_t n, const std::string& singular) {
  return FormatCount(n) + " " + singular + (n == 1 ? "" : "s");
}

uint64_t Fnv1a64(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

namespace {
// Each byte as it is when `keep` says so, else as \xNN.
template <typename Keep>
std::string Escaped(const std::string& bytes, Keep keep) {
  std::string out;
  out.reserve(bytes.size());
  for (unsigned char c : bytes) {
    if (keep(c)) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}
}  // namespace

std::string PrintableBytes(const std::string& bytes) {
  return Escaped(bytes, [](unsigned char c) { return c >= 0x20 && c < 0x7f; });
}

std::string ControlsEscaped(const std::string& text) {
  return Escaped(text, [](unsigned char c) { return c >= 0x20 && c != 0x7f; });
}

namespace {
std::string& StoredCommandName() {
  static std::string name = "denormd";
  return name;
}
}  // namespace

void SetCommandName(const std::string& argv0) {
  StoredCommandName() = argv0.find('/') == std::string::npos ? "denormd" : argv0;
}

const std::string& CommandName() { return StoredCommandName(); }

}  // namespace denormd
