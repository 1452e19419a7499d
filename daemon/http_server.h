// MetricsHttpServer: a minimal HTTP/1.1 server for Prometheus scrapes and
// health checks, on POSIX sockets: one background thread runs a poll(2) loop
// over every open connection, so no client can delay another.
//
//   GET /metrics  -> 200, Content-Type: text/plain; version=0.0.4, the body
//                    returned by the metrics callback
//   GET /healthz  -> 200 "ok\n" when the health callback returns true, else
//                    503 with the reason it gave and a newline
//   GET other     -> 404;  any other method -> 405 (Allow: GET)
// The query string is ignored. One request per connection (Connection: close).
// Connections are served concurrently: a request is answered as soon as its
// head has arrived, whatever other connections are doing. The request head is
// read with a size cap (431 beyond it) and each connection has a deadline (408
// when the request does not arrive in time; closed when the response cannot be
// delivered in time). At most Options::max_connections are open at once: past
// that, the oldest connection still waiting for its request is closed to make
// room, so idle or slow clients can never lock a health check out. Nothing
// blocks Stop().
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
#include <vector>

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
    // Most connections open at once (default 1024); a new one past it closes
    // the oldest that has not yet sent a complete request.
    size_t max_connections = 1024;
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

  // Stops accepting, abandons the connections in progress, if any, and joins
  // the server thread. Returns promptly; idempotent; a no-op if never started.
  // The server may be started again afterwards.
  void Stop();

  // The bound port while running; 0 before Start() and after Stop().
  int port() const { return port_.load(); }

 private:
  struct Connection;

  void Serve();
  // Accepts what the listening socket has pending, making room by closing
  // the oldest connection still reading when at the cap.
  void AcceptPending(std::vector<Connection>* connections, int64_t now_ms);
  // Advances one connection on readiness or its deadline; false once it is
  // finished and should be closed.
  bool Advance(Connection* connection, short revents, int64_t now_ms);
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
  // Server thread only: after accept() fails for want of descriptors, the
  // listening socket is left alone until this time (steady clock, ms).
  int64_t accept_paused_until_ms_ = 0;
};

}  // namespace denormd

#endif  // DENORMD_DAEMON_HTTP_SERVER_H_
