#include "common/log.h"

#include "common/redact.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace denormd {

namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
  }
  return "info";
}

void AppendValue(std::string* out, const std::string& value) {
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

}  // namespace

LogField::LogField(const char* key, double value) : key(key) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.3f", value);
  this->value = buffer;
}

void SetLogLevel(LogLevel level) { g_min_level = static_cast<int>(level); }

void Log(LogLevel level, const char* event, std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < g_min_level) return;
  auto now = std::chrono::system_clock::now();
  std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm utc;
  gmtime_r(&seconds, &utc);
  char stamp[64];
  std::snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, millis);
  std::string line = std::string("ts=") + stamp + " level=" + LevelName(level) + " event=" + event;
  for (const LogField& field : fields) {
    line += ' ';
    line += field.key;
    line += '=';
    AppendValue(&line, RedactSecrets(field.value));  // no secret reaches a log line
  }
  line += '\n';
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace denormd
