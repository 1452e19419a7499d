#include "connectors/event_log_source.h"

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <map>

namespace denormd {

EventLogSource::~EventLogSource() {
  if (owned_ && file_ != nullptr) std::fclose(file_);
}

Status EventLogSource::Open(const std::string& path, const PositionLoader& loader,
                            const Lanes& lanes, uint64_t max_line_bytes) {
  path_ = path;
  lanes_ = lanes;
  max_line_bytes_ = max_line_bytes;
  if (path == "-") {
    file_ = stdin;
    source_ = "stdin";
    return Status::Ok();
  }
  file_ = std::fopen(path.c_str(), "rb");
  if (file_ == nullptr) {
    return Status::InvalidInput("cannot open event log " + path + ": " + std::strerror(errno));
  }
  owned_ = true;
  char resolved[PATH_MAX];
  source_ = std::string("file:") + (realpath(path.c_str(), resolved) ? resolved : path.c_str());
  struct stat st;
  if (fstat(fileno(file_), &st) == 0 && S_ISREG(st.st_mode)) size_ = st.st_size;
  if (!loader) return Status::Ok();
  std::map<int32_t, StreamProgress> stored;
  DENORMD_RETURN_IF_ERROR(loader(source_, {0}, lanes_, &stored));
  auto it = stored.find(0);
  if (it == stored.end()) return Status::Ok();
  progress_ = it->second;
  resumed_after_ = std::max<int64_t>(0, lanes_.ResumeAfter(progress_));
  return SkipTo(resumed_after_);
}

bool EventLogSource::ReadLine(std::string* line, uint64_t* length) {
  // getc, not fgets: a NUL byte inside a line must not end it; and a line
  // longer than the limit is counted, not kept.
  line->clear();
  *length = 0;
  int c;
  bool any = false;
  while ((c = getc_unlocked(file_)) != EOF) {
    any = true;
    ++bytes_read_;
    if (c == '\n') break;
    if (*length <= max_line_bytes_) line->push_back(static_cast<char>(c));
    ++*length;
  }
  if (!any) return false;
  if (*length <= max_line_bytes_ && !line->empty() && line->back() == '\r') {
    line->pop_back();
    --*length;
  }
  ++line_;
  return true;
}

Status EventLogSource::SkipTo(int64_t target) {
  std::string line;
  uint64_t length = 0;
  while (line_ < target) {
    if (!ReadLine(&line, &length)) {
      return Status::InvalidInput(source_ + " has " + std::to_string(line_) +
                                  " lines but the stored position is line " +
                                  std::to_string(target) + "; was the log replaced?");
    }
  }
  return Status::Ok();
}

Status EventLogSource::Poll(size_t max, int /*max_delay_ms*/, int /*idle_ms*/,
                            std::vector<RawRecord>* out) {
  std::string line;
  uint64_t length = 0;
  size_t added = 0;
  while (added < max && !eof_) {
    if (!ReadLine(&line, &length)) {
      if (std::ferror(file_)) {
        return Status::Fatal("error reading " + path_ + ": " + std::strerror(errno));
      }
      eof_ = true;
      break;
    }
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank line
    RawRecord record;
    record.at = {source_, 0, line_};
    if (length > max_line_bytes_) {
      line.resize(kRefusedRecordBytes);
      record.refusal = TooLargeRefusal(length, max_line_bytes_);
    }
    record.value = line;
    out->push_back(std::move(record));
    ++added;
  }
  return Status::Ok();
}

bool EventLogSource::Applied(const SourcePosition& at, const std::string& type) const {
  return owned_ && at.source == source_ && at.position <= progress_.AppliedThrough(type);
}

std::vector<SourcePosition> EventLogSource::FencingPositions(size_t lane) const {
  if (!owned_) return {};  // stdin is not fenced
  return {{source_, 0, progress_.RowOf(lanes_.key(lane))}};
}

void EventLogSource::MarkCommitted(size_t lane, const std::vector<SourcePosition>& last) {
  for (const SourcePosition& position : last) {
    if (position.source == source_) progress_.SetRow(lanes_.key(lane), position);
  }
}

Status EventLogSource::Reseek() {
  return Status::Conflict(source_ + ": another replay of this log committed meanwhile; "
                          "run again to resume after what it applied");
}

}  // namespace denormd
