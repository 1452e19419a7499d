// ServiceNotifier: what `denormd run` tells the service manager that started
// it (systemd's Type=notify; deploy/systemd/denormd.service): when it is
// ready, reloading or stopping, what it is doing, and that it is alive.
//
// The protocol (sd_notify(3), without libsystemd): the manager passes the
// path of an AF_UNIX datagram socket in $NOTIFY_SOCKET (a leading '@' names
// the abstract namespace: the address is that name with a NUL byte instead of
// the '@'). Each message is one datagram of newline-separated KEY=VALUE
// assignments, in one sendto(); the manager accepts it from the main process
// (NotifyAccess=main), any thread. The assignments denormd sends:
//   READY=1                   started (or done reloading)
//   RELOADING=1               reloading; with MONOTONIC_USEC=<CLOCK_MONOTONIC
//                             in µs>, which systemd >= 253 requires
//   STOPPING=1                shutting down
//   STATUS=<one line>         free text for `systemctl status`
//   EXTEND_TIMEOUT_USEC=<µs>  the current start (or stop) may take this much
//                             longer from now, as long as another message follows
//   WATCHDOG=1                keep-alive: with WatchdogSec= the manager sets
//                             $WATCHDOG_USEC (and $WATCHDOG_PID, the process
//                             meant) and kills a service silent for that long
// Without $NOTIFY_SOCKET (a terminal, a container) nothing is sent.
//
// Thread-safe; every method may be called from any thread.
#ifndef DENORMD_DAEMON_SERVICE_NOTIFIER_H_
#define DENORMD_DAEMON_SERVICE_NOTIFIER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace denormd {

class ServiceNotifier {
 public:
  virtual ~ServiceNotifier() = default;

  // Sends `assignments` ("READY=1\nSTATUS=consuming") as one message. Best
  // effort, never blocking: a failure (no listener, its queue full) is
  // logged (once), never returned; the daemon runs on.
  virtual void Notify(const std::string& assignments) = 0;

  // Sends WATCHDOG=1 when the manager watches this process and the last
  // keep-alive is at least a quarter of the watchdog interval old; else
  // nothing. Cheap: call it whenever the daemon is known to be healthy.
  virtual void KeepAlive() = 0;

  // Whether a service manager listens (false: Notify and KeepAlive do nothing).
  virtual bool enabled() const = 0;
};

// A ServiceNotifier that sends nothing: no service manager.
class NullServiceNotifier : public ServiceNotifier {
 public:
  void Notify(const std::string& /*assignments*/) override {}
  void KeepAlive() override {}
  bool enabled() const override { return false; }
};

// The protocol above over a datagram socket.
class SocketServiceNotifier : public ServiceNotifier {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // `socket_path`: as in $NOTIFY_SOCKET ("/run/systemd/notify", "@name").
  // `watchdog_usec`: the watchdog interval, 0 for none. `now` paces
  // KeepAlive (a test may drive it). An unusable path is logged and makes a
  // notifier that sends nothing.
  SocketServiceNotifier(std::string socket_path, uint64_t watchdog_usec,
                        Clock now = std::chrono::steady_clock::now);
  ~SocketServiceNotifier() override;
  SocketServiceNotifier(const SocketServiceNotifier&) = delete;
  SocketServiceNotifier& operator=(const SocketServiceNotifier&) = delete;

  void Notify(const std::string& assignments) override;
  void KeepAlive() override;
  bool enabled() const override { return fd_ >= 0; }

  uint64_t watchdog_usec() const { return watchdog_usec_; }

 private:
  const std::string socket_path_;
  const uint64_t watchdog_usec_;
  const Clock now_;
  int fd_ = -1;
  std::string address_;  // the sockaddr_un bytes, length included
  std::mutex mu_;
  bool keep_alive_sent_ = false;                            // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point last_keep_alive_;   // GUARDED_BY(mu_)
  bool failure_logged_ = false;                             // GUARDED_BY(mu_)
};

// The notifier the environment asks for: a SocketServiceNotifier when
// $NOTIFY_SOCKET is set, with the watchdog interval of $WATCHDOG_USEC when
// $WATCHDOG_PID is unset or this process's id; else a NullServiceNotifier.
std::unique_ptr<ServiceNotifier> ServiceNotifierFromEnvironment();

// CLOCK_MONOTONIC now, in µs: the MONOTONIC_USEC= of a RELOADING=1 message.
uint64_t MonotonicMicros();

}  // namespace denormd

#endif  // DENORMD_DAEMON_SERVICE_NOTIFIER_H_
