#include "daemon/service_notifier.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace denormd {

namespace {

// The sockaddr_un for `path` ('@' = abstract namespace) as bytes, the
// address length being their size; "" when the path cannot be one.
std::string UnixAddress(const std::string& path) {
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  const bool abstract = path[0] == '@';
  if (path.size() > sizeof(address.sun_path) || (!abstract && path.size() == sizeof(address.sun_path))) {
    return "";  // a file name needs its terminating NUL in sun_path
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  if (abstract) address.sun_path[0] = '\0';
  // An abstract name is exactly its bytes; a file name ends at its NUL.
  const size_t length = offsetof(sockaddr_un, sun_path) + path.size() + (abstract ? 0 : 1);
  return std::string(reinterpret_cast<const char*>(&address), length);
}

bool ParseUnsigned(const char* text, uint64_t* out) {
  if (text == nullptr || *text < '0' || *text > '9') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = value;
  return true;
}

}  // namespace

SocketServiceNotifier::SocketServiceNotifier(std::string socket_path, uint64_t watchdog_usec,
                                             Clock now)
    : socket_path_(std::move(socket_path)), watchdog_usec_(watchdog_usec), now_(std::move(now)) {
  const bool unix_path =
      !socket_path_.empty() && (socket_path_[0] == '/' || socket_path_[0] == '@');
  address_ = unix_path ? UnixAddress(socket_path_) : "";
  if (address_.empty()) {
    Log(LogLevel::kWarn, "service_notify_unusable",
        {{"socket", socket_path_},
         {"reason", "not an absolute AF_UNIX path or @abstract name that fits sun_path"}});
    return;
  }
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    Log(LogLevel::kWarn, "service_notify_unusable",
        {{"socket", socket_path_}, {"reason", std::strerror(errno)}});
  }
}

SocketServiceNotifier::~SocketServiceNotifier() {
  if (fd_ >= 0) close(fd_);
}

void SocketServiceNotifier::Notify(const std::string& assignments) {
  if (fd_ < 0) return;
  // Never blocks: a manager that does not read (its queue full) loses the
  // message rather than stalling the batch loop.
  const ssize_t sent =
      sendto(fd_, assignments.data(), assignments.size(), MSG_NOSIGNAL | MSG_DONTWAIT,
             reinterpret_cast<const sockaddr*>(address_.data()), static_cast<socklen_t>(address_.size()));
  if (sent == static_cast<ssize_t>(assignments.size())) return;
  const std::string reason = sent < 0 ? std::strerror(errno) : "short write";
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_logged_) return;
  failure_logged_ = true;  // an absent manager should not flood the log
  Log(LogLevel::kWarn, "service_notify_failed",
      {{"socket", socket_path_}, {"reason", reason}, {"note", "further failures are not logged"}});
}

void SocketServiceNotifier::KeepAlive() {
  if (fd_ < 0 || watchdog_usec_ == 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = now_();
    if (keep_alive_sent_ && now - last_keep_alive_ < std::chrono::microseconds(watchdog_usec_ / 4)) {
      return;
    }
    keep_alive_sent_ = true;
    last_keep_alive_ = now;
  }
  Notify("WATCHDOG=1");
}

std::unique_ptr<ServiceNotifier> ServiceNotifierFromEnvironment() {
  const char* socket_path = std::getenv("NOTIFY_SOCKET");
  if (socket_path == nullptr || *socket_path == '\0') {
    return std::make_unique<NullServiceNotifier>();
  }
  uint64_t watchdog_usec = 0;
  uint64_t watchdog_pid = 0;
  if (!ParseUnsigned(std::getenv("WATCHDOG_USEC"), &watchdog_usec)) watchdog_usec = 0;
  const char* pid_text = std::getenv("WATCHDOG_PID");
  if (pid_text != nullptr && (!ParseUnsigned(pid_text, &watchdog_pid) ||
                              watchdog_pid != static_cast<uint64_t>(getpid()))) {
    watchdog_usec = 0;  // the watchdog is meant for another process
  }
  auto notifier = std::make_unique<SocketServiceNotifier>(socket_path, watchdog_usec);
  Log(LogLevel::kInfo, "service_notify",
      {{"socket", socket_path}, {"watchdog_ms", watchdog_usec / 1000}});
  return notifier;
}

uint64_t MonotonicMicros() {
  timespec now = {};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000u + static_cast<uint64_t>(now.tv_nsec) / 1000u;
}

}  // namespace denormd
