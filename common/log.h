// Structured logging: one line per significant event, key=value pairs, to
// stderr. Example:
//   ts=2026-11-25T22:30:01.123Z level=info event=batch_committed events=5000 ms=84
//
// Thread-safe (each line is written with one write call).
#ifndef DENORMD_COMMON_LOG_H_
#define DENORMD_COMMON_LOG_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

namespace denormd {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// A field value rendered as text; quoted in the output when it contains
// spaces, quotes or '='.
struct LogField {
  LogField(const char* key, std::string value) : key(key), value(std::move(value)) {}
  LogField(const char* key, const char* value) : key(key), value(value) {}
  LogField(const char* key, int64_t value) : key(key), value(std::to_string(value)) {}
  LogField(const char* key, uint64_t value) : key(key), value(std::to_string(value)) {}
  LogField(const char* key, int value) : key(key), value(std::to_string(value)) {}
  LogField(const char* key, double value);
  const char* key;
  std::string value;
};

void Log(LogLevel level, const char* event, std::initializer_list<LogField> fields = {});

// Lines below this level are dropped (default kInfo).
void SetLogLevel(LogLevel level);

}  // namespace denormd

#endif  // DENORMD_COMMON_LOG_H_
