// Structured logging: one line per significant event, to stderr (under
// systemd, the journal). Two formats, chosen once per process (SetLogFormat):
//   text (default), key=value pairs:
//     ts=2026-11-25T22:30:01.123Z level=info event=batch_committed events=5000 ms=84
//   json, one object per line, the fields after ts, level and event in call order:
//     {"ts":"2026-11-25T22:30:01.123Z","level":"info","event":"batch_committed","events":5000,"ms":84.000}
//
// Field values pass through RedactSecrets (common/redact.h) in both formats.
// Thread-safe: the level and format may change while other threads log, and
// each line is written with one write call, so lines never interleave.
#ifndef DENORMD_COMMON_LOG_H_
#define DENORMD_COMMON_LOG_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

namespace denormd {

enum class LogLevel { kDebug, kInfo, kWarn, kError };
enum class LogFormat { kText, kJson };

// A field of a log line. Text format: the value as is, quoted when it contains
// spaces, quotes or '='. JSON: numbers (the integer and double constructors,
// when finite) as JSON numbers, everything else as a JSON string.
struct LogField {
  LogField(const char* key, std::string value) : key(key), value(std::move(value)) {}
  LogField(const char* key, const char* value) : key(key), value(value) {}
  LogField(const char* key, int64_t value)
      : key(key), value(std::to_string(value)), is_number(true) {}
  LogField(const char* key, uint64_t value)
      : key(key), value(std::to_string(value)), is_number(true) {}
  LogField(const char* key, int value) : key(key), value(std::to_string(value)), is_number(true) {}
  LogField(const char* key, double value);
  const char* key;
  std::string value;
  bool is_number = false;  // `value` is a valid JSON number
};

void Log(LogLevel level, const char* event, std::initializer_list<LogField> fields = {});

// Lines below this level are dropped (default kInfo).
void SetLogLevel(LogLevel level);
// The format of the lines written from now on (default kText).
void SetLogFormat(LogFormat format);

// "debug", "info", "warn", "error" / "text", "json": the names used on the
// command line, in the config and in log lines.
const char* LogLevelName(LogLevel level);
const char* LogFormatName(LogFormat format);
// The value named `name` (exactly one of the names above); false if none.
bool ParseLogLevel(const std::string& name, LogLevel* out);
bool ParseLogFormat(const std::string& name, LogFormat* out);

// One log line as Log writes it, newline included (for tests and callers
// that write elsewhere). `ts` is the time stamp text.
std::string FormatLogLine(LogFormat format, const std::string& ts, LogLevel level,
                          const char* event, std::initializer_list<LogField> fields);

}  // namespace denormd

#endif  // DENORMD_COMMON_LOG_H_
