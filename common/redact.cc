#include "common/redact.h"

#include <algorithm>
#include <cctype>

namespace denormd {

namespace {

bool IsKeyChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// Replaces the password of every "scheme://user:password@" in place.
void RedactUrlPasswords(std::string* text) {
  for (size_t at = text->find("://"); at != std::string::npos; at = text->find("://", at + 3)) {
    const size_t start = at + 3;
    const size_t end = text->find_first_of("/@ \t\n\"'", start);
    if (end == std::string::npos || (*text)[end] != '@') continue;
    const size_t colon = text->find(':', start);
    if (colon == std::string::npos || colon > end) continue;
    text->replace(colon + 1, end - colon - 1, "***");
  }
}

// The end of the value starting at `i` (a quoted string, or up to a space,
// comma, semicolon, ampersand or closing bracket).
size_t ValueEnd(const std::string& text, size_t i) {
  if (i < text.size() && (text[i] == '\'' || text[i] == '"')) {
    const char quote = text[i];
    for (size_t j = i + 1; j < text.size(); ++j) {
      if (text[j] == '\\') {
        ++j;
      } else if (text[j] == quote) {
        return j + 1;
      }
    }
    return text.size();
  }
  while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i])) &&
         std::string(",;&)]}").find(text[i]) == std::string::npos) {
    ++i;
  }
  return i;
}

}  // namespace

bool IsSecretKey(const std::string& key) {
  const std::string k = Lower(key);
  for (const char* word : {"password", "passwd", "pwd", "secret", "token", "credential", "apikey",
                           "api_key", "api.key", "private.key", "private_key", "ssl.key",
                           "keystore", "jaas", "oauthbearer.config"}) {
    if (k.find(word) != std::string::npos) return true;
  }
  return false;
}

std::string RedactSecrets(const std::string& text) {
  std::string out = text;
  RedactUrlPasswords(&out);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] != '=' && out[i] != ':') continue;
    // The key before it, bare or quoted ("token": ...).
    const size_t key_end = i > 0 && out[i - 1] == '"' ? i - 1 : i;
    size_t key_start = key_end;
    while (key_start > 0 && IsKeyChar(out[key_start - 1])) --key_start;
    if (key_start == key_end || !IsSecretKey(out.substr(key_start, key_end - key_start))) continue;
    size_t value = i + 1;
    while (value < out.size() && out[value] == ' ') ++value;
    if (out.compare(value, 3, "***") == 0) continue;
    const size_t end = ValueEnd(out, value);
    if (end == value) continue;
    out.replace(value, end - value, "***");
    i = value + 2;
  }
  return out;
}

}  // namespace denormd
