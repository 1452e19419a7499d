// EventLogSource: a JSON Lines event log (a file, or "-" for stdin) as an
// EventSource: one record per non-blank line, positioned by 1-based line
// number, in one stream "file:<absolute path>" (partition 0).
//
// A file resumes after the line its stored position names, so a replay that
// is interrupted at any point (kill -9 included) and run again applies
// exactly the rest. stdin does not resume and is not fenced.
#ifndef DENORMD_CONNECTORS_EVENT_LOG_SOURCE_H_
#define DENORMD_CONNECTORS_EVENT_LOG_SOURCE_H_

#include <cstdio>
#include <string>
#include <vector>

#include "connectors/event_source.h"

namespace denormd {

class EventLogSource : public EventSource {
 public:
  EventLogSource() = default;
  ~EventLogSource() override;
  EventLogSource(const EventLogSource&) = delete;
  EventLogSource& operator=(const EventLogSource&) = delete;

  // Opens `path` ("-" = stdin) and, for a file, skips to where `lanes`
  // resume by the stored positions (`loader` may be empty: start at the
  // first line). Lines over `max_line_bytes` are refused
  // (RawRecord::refusal) without being held.
  Status Open(const std::string& path, const PositionLoader& loader, const Lanes& lanes,
              uint64_t max_line_bytes = 1 << 20);

  // The stream name: "file:<absolute path>" or "stdin".
  const std::string& source() const { return source_; }
  // The line it resumed after (0: the beginning).
  int64_t resumed_after_line() const { return resumed_after_; }
  // The last line delivered so far.
  int64_t last_line() const { return line_; }
  // Bytes consumed so far and the file's size (0 if unknown, e.g. stdin).
  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t size() const { return size_; }

  Status Poll(size_t max, int max_delay_ms, int idle_ms, std::vector<RawRecord>* out) override;
  bool Exhausted() const override { return eof_; }
  const Lanes& lanes() const override { return lanes_; }
  bool Applied(const SourcePosition& at, const std::string& type) const override;
  std::vector<SourcePosition> FencingPositions(size_t lane) const override;
  void MarkCommitted(size_t lane, const std::vector<SourcePosition>& last) override;
  Status Reseek() override;

 private:
  // Reads the next line (its bytes as they are, NUL bytes included, without
  // the line break and a trailing CR), keeping at most max_line_bytes_ + 1 of
  // them; *length is its whole length. False at the end.
  bool ReadLine(std::string* line, uint64_t* length);
  Status SkipTo(int64_t line);

  std::FILE* file_ = nullptr;
  bool owned_ = false;
  bool eof_ = false;
  std::string path_;
  std::string source_;
  int64_t line_ = 0;
  int64_t resumed_after_ = 0;
  Lanes lanes_ = Lanes::Single(Config());
  StreamProgress progress_;  // the stored rows, as the lanes commit
  uint64_t bytes_read_ = 0;
  uint64_t size_ = 0;
  uint64_t max_line_bytes_ = 1 << 20;
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_EVENT_LOG_SOURCE_H_
