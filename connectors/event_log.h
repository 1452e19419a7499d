// EventLogReader: reads a JSON Lines event log (a file, or "-" for stdin) as
// raw events, one per non-blank line, positioned by 1-based line number.
//
// Positions make replays resumable: the stored position of a log is the line
// number of the last applied event, and SkipTo() resumes after it.
#ifndef DENORMD_CONNECTORS_EVENT_LOG_H_
#define DENORMD_CONNECTORS_EVENT_LOG_H_

#include <cstdio>
#include <string>
#include <vector>

#include "common/status.h"
#include "projections/event.h"

namespace denormd {

class EventLogReader {
 public:
  EventLogReader() = default;
  ~EventLogReader();
  EventLogReader(const EventLogReader&) = delete;
  EventLogReader& operator=(const EventLogReader&) = delete;

  // Opens `path` ("-" = stdin). The stream name is "file:<absolute path>" or
  // "stdin".
  Status Open(const std::string& path);
  const std::string& source() const { return source_; }

  // Skips lines up to and including line `line`.
  Status SkipTo(int64_t line);

  // Appends up to `max` events to *out. Sets *eof at the end of the log.
  Status Read(size_t max, std::vector<RawEvent>* out, bool* eof);

  int64_t line() const { return line_; }
  // Bytes consumed so far and the file's size (0 if unknown, e.g. stdin).
  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t size() const { return size_; }

 private:
  bool ReadLine(std::string* line);

  std::FILE* file_ = nullptr;
  bool owned_ = false;
  std::string path_;
  std::string source_;
  int64_t line_ = 0;
  uint64_t bytes_read_ = 0;
  uint64_t size_ = 0;
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_EVENT_LOG_H_
