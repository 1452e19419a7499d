#include "connectors/event_log.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include <sys/stat.h>

namespace denormd {

EventLogReader::~EventLogReader() {
  if (owned_ && file_ != nullptr) std::fclose(file_);
}

Status EventLogReader::Open(const std::string& path) {
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
  return Status::Ok();
}

bool EventLogReader::ReadLine(std::string* line) {
  line->clear();
  char buffer[65536];
  bool any = false;
  while (std::fgets(buffer, sizeof(buffer), file_) != nullptr) {
    any = true;
    size_t n = std::strlen(buffer);
    bytes_read_ += n;
    if (n > 0 && buffer[n - 1] == '\n') {
      line->append(buffer, n - 1);
      break;
    }
    line->append(buffer, n);
  }
  if (!any) return false;
  if (!line->empty() && line->back() == '\r') line->pop_back();
  ++line_;
  return true;
}

Status EventLogReader::SkipTo(int64_t target) {
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

Status EventLogReader::Read(size_t max, std::vector<RawEvent>* out, bool* eof) {
  *eof = false;
  std::string line;
  size_t added = 0;
  while (added < max) {
    if (!ReadLine(&line)) {
      if (std::ferror(file_)) {
        return Status::Fatal("error reading " + path_ + ": " + std::strerror(errno));
      }
      *eof = true;
      return Status::Ok();
    }
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank line
    RawEvent event;
    event.at.source = source_;
    event.at.partition = 0;
    event.at.position = line_;
    event.bytes = line;
    out->push_back(std::move(event));
    ++added;
  }
  return Status::Ok();
}

}  // namespace denormd
