#include "daemon/http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <chrono>
#include <cstring>
#include <exception>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/log.h"

namespace denormd {

namespace {

constexpr int kListenBacklog = SOMAXCONN;
// After the response, how long to wait for the client to close before closing
// ourselves (closing with unread request bytes would reset the connection and
// could destroy the response in flight).
constexpr int64_t kLingerMs = 500;
constexpr size_t kMaxLingerBytes = 64 * 1024;

// "127.0.0.1:9464", "[::1]:9464".
std::string HostPort(const std::string& address, int port) {
  std::string host = address.empty() ? "*" : address;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return host + ":" + std::to_string(port);
}

const char* Reason(int code) {
  switch (code) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
  }
  return "Unknown";
}

std::string Response(int code, const std::string& content_type, const std::string& body,
                     const std::string& extra_headers = "") {
  std::string out = "HTTP/1.1 " + std::to_string(code) + " " + Reason(code) + "\r\n";
  out += "Content-Type: " + content_type + "\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += extra_headers;
  out += "Connection: close\r\n\r\n";
  out += body;
  return out;
}

std::string TextResponse(int code, const std::string& body,
                         const std::string& extra_headers = "") {
  return Response(code, "text/plain; charset=utf-8", body, extra_headers);
}

// Whether `head` holds a complete request head (ends with an empty line).
bool HeadComplete(const std::string& head) {
  return head.find("\r\n\r\n") != std::string::npos ||
         head.find("\n\n") != std::string::npos;
}

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

}  // namespace

MetricsHttpServer::MetricsHttpServer(MetricsCallback metrics, HealthCallback health)
    : MetricsHttpServer(std::move(metrics), std::move(health), Options()) {}

MetricsHttpServer::MetricsHttpServer(MetricsCallback metrics, HealthCallback health,
                                     Options options)
    : metrics_(std::move(metrics)), health_(std::move(health)), options_(options) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

Status MetricsHttpServer::Start(const std::string& address, int port) {
  std::lock_guard<std::mutex> lock(lifecycle_mutex_);
  if (thread_.joinable()) {
    return Status::Fatal("metrics server already listening on port " +
                         std::to_string(port_.load()));
  }
  if (port < 0 || port > 65535) {
    return Status::InvalidInput("metrics port " + std::to_string(port) +
                                " is out of range 0-65535");
  }
  const std::string where = HostPort(address, port);

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int gai = getaddrinfo(address.empty() ? nullptr : address.c_str(),
                        std::to_string(port).c_str(), &hints, &found);
  if (gai != 0) {
    return Status::Fatal("cannot listen on " + where + ": " + gai_strerror(gai));
  }
  int fd = -1;
  int last_errno = 0;
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                ai->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, kListenBacklog) == 0) break;
    last_errno = errno;
    CloseFd(&fd);
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return Status::Fatal("cannot listen on " + where + ": " +
                         (last_errno != 0 ? std::strerror(last_errno) : "no usable address"));
  }

  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
    int e = errno;
    close(fd);
    return Status::Fatal("cannot listen on " + where + ": getsockname: " + std::strerror(e));
  }
  int bound_port = bound.ss_family == AF_INET6
                       ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    int e = errno;
    close(fd);
    return Status::Fatal("cannot listen on " + where + ": pipe: " + std::strerror(e));
  }
  listen_fd_ = fd;
  wake_read_fd_ = wake[0];
  wake_write_fd_ = wake[1];
  port_.store(bound_port);
  thread_ = std::thread(&MetricsHttpServer::Serve, this);
  Log(LogLevel::kInfo, "metrics_listening",
      {{"address", address.empty() ? std::string("*") : address}, {"port", bound_port}});
  return Status::Ok();
}

void MetricsHttpServer::Stop() {
  std::lock_guard<std::mutex> lock(lifecycle_mutex_);
  if (!thread_.joinable()) return;
  // The byte is never read: every later poll in the server thread sees the
  // pipe readable and returns at once.
  char byte = 1;
  while (write(wake_write_fd_, &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  CloseFd(&listen_fd_);
  CloseFd(&wake_read_fd_);
  CloseFd(&wake_write_fd_);
  int port = port_.exchange(0);
  Log(LogLevel::kInfo, "metrics_stopped", {{"port", port}});
}

// One client connection and where it is in its single exchange.
struct MetricsHttpServer::Connection {
  enum class Phase { kReading, kWriting, kLingering };

  int fd = -1;
  Phase phase = Phase::kReading;
  int64_t deadline_ms = 0;  // the whole exchange; lingering has its own
  std::string head;         // request bytes received so far
  std::string response;
  size_t sent = 0;
  size_t discarded = 0;     // bytes read and dropped while lingering
};

void MetricsHttpServer::Serve() {
  std::vector<Connection> connections;
  std::vector<pollfd> fds;
  while (true) {
    int64_t now = SteadyMillis();
    const bool accepting = now >= accept_paused_until_ms_;
    fds.clear();
    fds.push_back({wake_read_fd_, POLLIN, 0});
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    int64_t next_deadline = accepting ? INT64_MAX : accept_paused_until_ms_;
    for (const Connection& c : connections) {
      fds.push_back({c.fd, c.phase == Connection::Phase::kWriting ? short(POLLOUT) : short(POLLIN),
                     0});
      next_deadline = std::min(next_deadline, c.deadline_ms);
    }
    int timeout = next_deadline == INT64_MAX
                      ? -1
                      : static_cast<int>(std::clamp<int64_t>(next_deadline - now, 0, 60000));
    if (poll(fds.data(), fds.size(), timeout) < 0) {
      if (errno == EINTR) continue;
      Log(LogLevel::kError, "metrics_poll_failed", {{"error", std::strerror(errno)}});
      break;
    }
    if (fds[0].revents != 0) break;  // Stop()
    now = SteadyMillis();
    // Advance the existing connections first (their slots in `fds` follow
    // the first two), then accept: accepting may close one to make room.
    size_t kept = 0;
    for (size_t i = 0; i < connections.size(); ++i) {
      Connection& c = connections[i];
      if (Advance(&c, fds[i + 2].revents, now)) {
        if (kept != i) connections[kept] = std::move(c);
        ++kept;
      } else {
        close(c.fd);
      }
    }
    connections.resize(kept);
    if (fds[1].revents != 0) AcceptPending(&connections, now);
  }
  for (Connection& c : connections) close(c.fd);
}

void MetricsHttpServer::AcceptPending(std::vector<Connection>* connections, int64_t now_ms) {
  // A bounded number per round, so a flood cannot starve the others.
  for (int i = 0; i < 64; ++i) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      int e = errno;
      if (e == EAGAIN || e == EWOULDBLOCK) return;
      if (e == EINTR || e == ECONNABORTED) continue;
      // E.g. EMFILE: the pending connection stays readable, so pause instead
      // of spinning; closing a waiting connection frees a descriptor.
      Log(LogLevel::kWarn, "metrics_accept_failed",
          {{"error", std::strerror(e)}, {"open_connections", connections->size()}});
      accept_paused_until_ms_ = now_ms + 100;
      if (e == EMFILE || e == ENFILE) {
        auto oldest = std::find_if(connections->begin(), connections->end(), [](const Connection& c) {
          return c.phase == Connection::Phase::kReading;
        });
        if (oldest != connections->end()) {
          close(oldest->fd);
          connections->erase(oldest);
        }
      }
      return;
    }
    if (connections->size() >= std::max<size_t>(options_.max_connections, 1)) {
      // Connections are kept in the order they were accepted: the first one
      // still reading has waited longest for its request.
      auto oldest = std::find_if(connections->begin(), connections->end(), [](const Connection& c) {
        return c.phase == Connection::Phase::kReading;
      });
      if (oldest == connections->end()) oldest = connections->begin();
      Log(LogLevel::kDebug, "metrics_connection_dropped",
          {{"reason", "connection limit"}, {"max_connections", options_.max_connections}});
      close(oldest->fd);
      connections->erase(oldest);
    }
    Connection c;
    c.fd = fd;
    c.deadline_ms = now_ms + options_.io_timeout_ms;
    connections->push_back(std::move(c));
    // Most clients send their request with the connection: try it now.
    if (!Advance(&connections->back(), POLLIN, now_ms)) {
      close(fd);
      connections->pop_back();
    }
  }
}

bool MetricsHttpServer::Advance(Connection* c, short revents, int64_t now_ms) {
  using Phase = Connection::Phase;
  char buffer[4096];
  if (c->phase == Phase::kReading && (revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
    while (!HeadComplete(c->head)) {
      if (c->head.size() >= options_.max_request_bytes) {
        c->response = TextResponse(431, "request head larger than " +
                                            std::to_string(options_.max_request_bytes) +
                                            " bytes\n");
        break;
      }
      size_t want = std::min(sizeof(buffer), options_.max_request_bytes - c->head.size());
      ssize_t n = recv(c->fd, buffer, want, 0);
      if (n > 0) {
        c->head.append(buffer, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return now_ms < c->deadline_ms;
      return false;  // closed before a complete request, or reset: nothing to answer
    }
    if (c->response.empty()) c->response = Respond(c->head);
    c->phase = Phase::kWriting;
    revents = POLLOUT;  // try at once; the socket is almost always writable
  } else if (c->phase == Phase::kReading) {
    if (now_ms < c->deadline_ms) return true;
    Log(LogLevel::kDebug, "metrics_request_timeout", {{"bytes", c->head.size()}});
    c->response = TextResponse(408, "request not received in time\n");
    c->phase = Phase::kWriting;
    // A short grace to deliver the 408 itself.
    c->deadline_ms = now_ms + std::min<int64_t>(options_.io_timeout_ms, 1000);
    revents = POLLOUT;
  }

  if (c->phase == Phase::kWriting) {
    if ((revents & (POLLOUT | POLLHUP | POLLERR)) == 0) return now_ms < c->deadline_ms;
    while (c->sent < c->response.size()) {
      ssize_t n = send(c->fd, c->response.data() + c->sent, c->response.size() - c->sent,
                       MSG_NOSIGNAL);
      if (n > 0) {
        c->sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return now_ms < c->deadline_ms;
      return false;  // the client went away
    }
    // Signal the end of the response, then give the client a moment to close
    // first, discarding whatever it still sends (closing with unread bytes
    // would reset the connection and could destroy the response in flight).
    shutdown(c->fd, SHUT_WR);
    std::string().swap(c->response);
    c->phase = Phase::kLingering;
    c->deadline_ms = std::min(c->deadline_ms, now_ms + kLingerMs);
    revents = POLLIN;
  }

  // Lingering.
  if ((revents & (POLLIN | POLLHUP | POLLERR)) == 0) return now_ms < c->deadline_ms;
  while (c->discarded < kMaxLingerBytes) {
    ssize_t n = recv(c->fd, buffer, sizeof(buffer), 0);
    if (n > 0) {
      c->discarded += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return now_ms < c->deadline_ms;
    } else {
      return false;  // EOF or error
    }
  }
  return false;
}

std::string MetricsHttpServer::Respond(const std::string& request_head) {
  // Request line: METHOD SP request-target SP HTTP-version.
  std::string line = request_head.substr(0, request_head.find('\n'));
  if (!line.empty() && line.back() == '\r') line.pop_back();
  size_t first_space = line.find(' ');
  size_t second_space =
      first_space == std::string::npos ? std::string::npos : line.find(' ', first_space + 1);
  if (second_space == std::string::npos || first_space == 0 ||
      second_space == first_space + 1 || line.compare(second_space + 1, 5, "HTTP/") != 0) {
    return TextResponse(400, "malformed request line\n");
  }
  std::string method = line.substr(0, first_space);
  std::string target = line.substr(first_space + 1, second_space - first_space - 1);
  std::string path = target.substr(0, target.find('?'));
  if (method != "GET") {
    return TextResponse(405, "method " + method + " not allowed; use GET\n", "Allow: GET\r\n");
  }
  try {
    if (path == "/metrics") {
      std::string body = metrics_ ? metrics_() : std::string();
      return Response(200, "text/plain; version=0.0.4; charset=utf-8", body);
    }
    if (path == "/healthz") {
      std::string why;
      if (!health_ || health_(&why)) return TextResponse(200, "ok\n");
      if (why.empty()) why = "unhealthy";
      if (why.back() != '\n') why += '\n';
      return TextResponse(503, why);
    }
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "metrics_handler_failed", {{"path", path}, {"error", e.what()}});
    return TextResponse(500, "internal error\n");
  } catch (...) {
    Log(LogLevel::kError, "metrics_handler_failed", {{"path", path}, {"error", "unknown"}});
    return TextResponse(500, "internal error\n");
  }
  return TextResponse(404, "not found; try /metrics or /healthz\n");
}

}  // namespace denormd
