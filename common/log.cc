#include "common/log.h"

#include "common/redact.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace denormd {

namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};

void AppendTextValue(std::string* out, const std::string& value) {
  bool quote = value.empty() || value.find_first_of(" \"=\t\n") != std::string::npos;
  if (!quote) {
    *out += value;
    return;
  }
  *out += '"';
  for (char c : value) {
    if (c == '"' || c == '\\') *out += '\\';
    if (c == '\n') {
      *out += "\\n";
      continue;
    }
    *out += c;
  }
  *out += '"';
}

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs,
// no surrogates, at most U+10FFFF), or 0 if there is none.
size_t Utf8SequenceLength(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t length;
  unsigned char low = 0x80, high = 0xBF;  // bounds of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    length = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    length = 3;
    if (c == 0xE0) low = 0xA0;
    if (c == 0xED) high = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    length = 4;
    if (c == 0xF0) low = 0x90;
    if (c == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > s.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

// `value` as a JSON string (RFC 8259): quotes, backslashes and control
// characters escaped; bytes that are not UTF-8 become U+FFFD, so that the
// line is always valid JSON.
void AppendJsonString(std::string* out, const std::string& value) {
  *out += '"';
  for (size_t i = 0; i < value.size();) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c >= 0x80) {
      const size_t length = Utf8SequenceLength(value, i);
      if (length == 0) {
        *out += "\\ufffd";
        ++i;
      } else {
        out->append(value, i, length);
        i += length;
      }
      continue;
    }
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
          *out += escaped;
        } else {
          *out += static_cast<char>(c);
        }
    }
    ++i;
  }
  *out += '"';
}

std::string TextLine(const std::string& ts, LogLevel level, const char* event,
                     std::initializer_list<LogField> fields) {
  std::string line = "ts=" + ts + " level=" + LogLevelName(level) + " event=" + event;
  for (const LogField& field : fields) {
    line += ' ';
    line += field.key;
    line += '=';
    AppendTextValue(&line, RedactSecrets(field.value));  // no secret reaches a log line
  }
  return line + '\n';
}

std::string JsonLine(const std::string& ts, LogLevel level, const char* event,
                     std::initializer_list<LogField> fields) {
  std::string line = "{\"ts\":";
  AppendJsonString(&line, ts);
  line += ",\"level\":";
  AppendJsonString(&line, LogLevelName(level));
  line += ",\"event\":";
  AppendJsonString(&line, event);
  for (const LogField& field : fields) {
    line += ',';
    AppendJsonString(&line, field.key);
    line += ':';
    if (field.is_number) {
      line += field.value;
    } else {
      AppendJsonString(&line, RedactSecrets(field.value));  // no secret reaches a log line
    }
  }
  return line + "}\n";
}

std::string NowStamp() {
  auto now = std::chrono::system_clock::now();
  std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm utc;
  gmtime_r(&seconds, &utc);
  char stamp[64];
  std::snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, millis);
  return stamp;
}

}  // namespace

LogField::LogField(const char* key, double value) : key(key) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.3f", value);
  this->value = buffer;
  is_number = std::isfinite(value);  // "nan" and "inf" are no JSON numbers
}

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
  }
  return "info";
}

const char* LogFormatName(LogFormat format) {
  return format == LogFormat::kJson ? "json" : "text";
}

bool ParseLogLevel(const std::string& name, LogLevel* out) {
  for (LogLevel level : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    if (name == LogLevelName(level)) {
      *out = level;
      return true;
    }
  }
  return false;
}

bool ParseLogFormat(const std::string& name, LogFormat* out) {
  for (LogFormat format : {LogFormat::kText, LogFormat::kJson}) {
    if (name == LogFormatName(format)) {
      *out = format;
      return true;
    }
  }
  return false;
}

void SetLogLevel(LogLevel level) { g_min_level = static_cast<int>(level); }

void SetLogFormat(LogFormat format) { g_format = static_cast<int>(format); }

std::string FormatLogLine(LogFormat format, const std::string& ts, LogLevel level,
                          const char* event, std::initializer_list<LogField> fields) {
  return format == LogFormat::kJson ? JsonLine(ts, level, event, fields)
                                    : TextLine(ts, level, event, fields);
}

void Log(LogLevel level, const char* event, std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < g_min_level) return;
  const std::string line =
      FormatLogLine(static_cast<LogFormat>(g_format.load()), NowStamp(), level, event, fields);
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace denormd
