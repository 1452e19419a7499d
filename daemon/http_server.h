// MetricsHttpServer: a minimal HTTP/1.1 server for Prometheus scrapes and
// health checks, on POSIX sockets, serving from one background thread.
//
//   GET /metrics  -> 200, Content-Type: text/plain; version=0.0.4, the body
//                    returned by the metrics callback
//   GET /healthz  -> 200 "ok\n" when the health callback returns true, else
//                    503 with the reason it gave and a newline
//   GET other     -> 404;  any other method -> 405 (Allow: GET)
// The query string is ignored. One request per connection (Connection: close);
// connections are served one after the other. The request head is read with a
// size cap (431 beyond it) and the whole exchange with a deadline (408 when the
// request does not arrive in time), so a stuck or slow client delays other
// scrapes by at most Options::io_timeout_ms and never blocks Stop().
//
// Thread-safety: Start(), Stop() and the destructor may be called from any
// thread (they are serialized internally); port() from any thread. The
// callbacks run on the server thread, one call at a time, and must be safe to
// call concurrently with whatever the rest of the daemon does (Metrics::Render
// is). An exception thrown by a callback is answered with 500 and logged.
#ifndef DENORMD_DAEMON_HTTP_SERVER_H_
#define DENORMD_DAEMON_HTTP_SERVER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"

namespace denormd {

class MetricsHttpServer {
 public:
  // Returns the /metrics body (Prometheus text format).
  using MetricsCallback = std::function<std::string()>;
  // Returns whether the daemon is healthy; when not, sets *why to the reason.
  using HealthCallback = std::function<bool(std::string* why)>;

  struct Options {
    // Time allowed for one connection to deliver its request and take the
    // response, in milliseconds (default 5000).
    int io_timeout_ms = 5000;
    // Largest request head (request line and headers) read, in bytes
    // (default 8192); a longer one is answered with 431.
    size_t max_request_bytes = 8192;
  };

  // An empty `health` callback means always healthy; an empty `metrics`
  // callback serves an empty body.
  MetricsHttpServer(MetricsCallback metrics, HealthCallback health);
  MetricsHttpServer(MetricsCallback metrics, HealthCallback health, Options options);
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Stops the server (see Stop()).
  ~MetricsHttpServer();

  // Listens on `address` (a numeric IPv4/IPv6 address or a host name; "" for
  // all interfaces) and `port` (0 picks a free port; see port()), then starts
  // serving on a background thread. Fails, with nothing started, when the
  // server is already running, the port is out of range, or the address cannot
  // be resolved or bound, e.g.
  //   "cannot listen on 127.0.0.1:9464: Address already in use".
  Status Start(const std::string& address, int port);

  // Stops accepting, abandons the connection in progress, if any, and joins
  // the server thread. Returns promptly; idempotent; a no-op if never started.
  // The server may be started again afterwards.
  void Stop();

  // The bound port while running; 0 before Start() and after Stop().
  int port() const { return port_.load(); }

 private:
  enum class Wait { kReady, kTimeout, kStopped };

  void Serve();
  void HandleConnection(int fd);
  // Waits until `fd` is ready for `events` (POLLIN/POLLOUT), `deadline_ms`
  // (steady clock, milliseconds) passes, or Stop() is called.
  Wait WaitFor(int fd, short events, int64_t deadline_ms) const;
  bool WriteAll(int fd, const std::string& data, int64_t deadline_ms) const;
  // The status line, headers and body of the response to `request_head`.
  std::string Respond(const std::string& request_head);

  const MetricsCallback metrics_;
  const HealthCallback health_;
  const Options options_;

  std::mutex lifecycle_mutex_;  // serializes Start() and Stop()
  std::thread thread_;          // GUARDED_BY(lifecycle_mutex_)
  // Written by Start()/Stop() only while the server thread is not running.
  int listen_fd_ = -1;
  int wake_read_fd_ = -1;   // readable once Stop() has been called
  int wake_write_fd_ = -1;
  std::atomic<int> port_{0};
};

}  // namespace denormd

#endif  // DENORMD_DAEMON_HTTP_SERVER_H_
