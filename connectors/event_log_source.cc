#include "connectors/event_log_source.h"

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>

namespace denormd {

EventLogSource::~EventLogSource() {
  if (owned_ && file_ != nullptr) std::fclose(file_);
}

Status EventLogSource::Open(const std::string& path, const PositionLoader& loader) {
  path_ = path;
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
  std::map<int32_t, int64_t> stored;
  DENORMD_RETURN_IF_ERROR(loader(source_, &stored));
  auto it = stored.find(0);
  if (it == stored.end()) return Status::Ok();
  committed_ = it->second;
  resumed_after_ = it->second;
  return SkipTo(it->second);
}

bool EventLogSource::ReadLine(std::string* line) {
  // getline, not fgets: a NUL byte inside a line must not end it.
  char* buffer = nullptr;
  size_t capacity = 0;
  const ssize_t n = getline(&buffer, &capacity, file_);
  if (n < 0) {
    std::free(buffer);
    return false;
  }
  bytes_read_ += static_cast<uint64_t>(n);
  line->assign(buffer, static_cast<size_t>(n));
  std::free(buffer);
  if (!line->empty() && line->back() == '\n') line->pop_back();
  if (!line->empty() && line->back() == '\r') line->pop_back();
  ++line_;
  return true;
}

Status EventLogSource::SkipTo(int64_t target) {
  std::string line;
  while (line_ < target) {
    if (!ReadLine(&line)) {
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
  size_t added = 0;
  while (added < max && !eof_) {
    if (!ReadLine(&line)) {
      if (std::ferror(file_)) {
        return Status::Fatal("error reading " + path_ + ": " + std::strerror(errno));
      }
      eof_ = true;
      break;
    }
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank line
    RawRecord record;
    record.at = {source_, 0, line_};
    record.value = line;
    out->push_back(std::move(record));
    ++added;
  }
  return Status::Ok();
}

std::vector<SourcePosition> EventLogSource::FencingPositions() const {
  if (!owned_) return {};  // stdin is not fenced
  return {{source_, 0, committed_}};
}

void EventLogSource::MarkCommitted(const std::vector<SourcePosition>& last) {
  for (const SourcePosition& position : last) {
    if (position.source == source_) committed_ = position.position;
  }
}

Status EventLogSource::Reseek() {
  return Status::Conflict(source_ + ": another replay of this log committed meanwhile; "
                          "run again to resume after what it applied");
}

}  // namespace denormd
