// Tests of daemon/service_notifier: the sd_notify protocol against an
// AF_UNIX datagram socket the test creates (a file and an abstract name),
// the watchdog's pacing with a driven clock, and the environment.
#include "daemon/service_notifier.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::NotifyListener;

TEST(ServiceNotifier, SendsEachMessageAsOneDatagramToAFileSocket) {
  NotifyListener manager(/*abstract=*/false);
  SocketServiceNotifier notifier(manager.path(), 0);
  ASSERT_TRUE(notifier.enabled());
  notifier.Notify("READY=1\nSTATUS=consuming t");
  notifier.Notify("STOPPING=1");
  EXPECT_EQ("READY=1\nSTATUS=consuming t", manager.Receive());
  EXPECT_EQ("STOPPING=1", manager.Receive());
}

TEST(ServiceNotifier, ReachesAnAbstractSocket) {
  NotifyListener manager(/*abstract=*/true);
  SocketServiceNotifier notifier(manager.path(), 0);
  notifier.Notify("READY=1");
  EXPECT_EQ("READY=1", manager.Receive());
}

TEST(ServiceNotifier, KeepAliveSendsAtMostEveryQuarterInterval) {
  NotifyListener manager(/*abstract=*/false);
  auto now = std::chrono::steady_clock::time_point();
  SocketServiceNotifier notifier(manager.path(), /*watchdog_usec=*/8000000, [&] { return now; });
  notifier.KeepAlive();  // the first is sent at once
  EXPECT_EQ("WATCHDOG=1", manager.Receive());
  now += std::chrono::milliseconds(1999);
  notifier.KeepAlive();  // too soon: nothing
  notifier.Notify("STATUS=marker");
  EXPECT_EQ("STATUS=marker", manager.Receive());
  now += std::chrono::milliseconds(1);  // 2 s = 8 s / 4
  notifier.KeepAlive();
  EXPECT_EQ("WATCHDOG=1", manager.Receive());
}

TEST(ServiceNotifier, NoWatchdogNoKeepAlive) {
  NotifyListener manager(/*abstract=*/false);
  SocketServiceNotifier notifier(manager.path(), 0);
  notifier.KeepAlive();
  notifier.Notify("STATUS=marker");
  EXPECT_EQ("STATUS=marker", manager.Receive());
}

TEST(ServiceNotifier, AnAbsentManagerIsNotAnError) {
  SocketServiceNotifier gone(std::string(::testing::TempDir()) + "/no-such-socket", 1000000);
  gone.Notify("READY=1");  // logged once, not fatal
  gone.KeepAlive();
  SocketServiceNotifier relative("relative/path", 1000000);
  EXPECT_FALSE(relative.enabled());
  relative.Notify("READY=1");
}

// Sets (or unsets, with nullptr) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

TEST(ServiceNotifier, FromEnvironmentSendsNothingWithoutNotifySocket) {
  ScopedEnv socket("NOTIFY_SOCKET", nullptr);
  EXPECT_FALSE(ServiceNotifierFromEnvironment()->enabled());
}

TEST(ServiceNotifier, FromEnvironmentHonoursWatchdogPid) {
  NotifyListener manager(/*abstract=*/false);
  ScopedEnv socket("NOTIFY_SOCKET", manager.path().c_str());
  ScopedEnv usec("WATCHDOG_USEC", "1000000");
  {
    ScopedEnv pid("WATCHDOG_PID", std::to_string(getpid() + 1).c_str());  // another process's
    std::unique_ptr<ServiceNotifier> notifier = ServiceNotifierFromEnvironment();
    ASSERT_TRUE(notifier->enabled());
    notifier->KeepAlive();
    notifier->Notify("STATUS=marker");
    EXPECT_EQ("STATUS=marker", manager.Receive());
  }
  const std::string own = std::to_string(getpid());
  for (bool set_pid : {false, true}) {  // unset, or this process
    ScopedEnv watchdog_pid("WATCHDOG_PID", set_pid ? own.c_str() : nullptr);
    std::unique_ptr<ServiceNotifier> notifier = ServiceNotifierFromEnvironment();
    notifier->KeepAlive();
    EXPECT_EQ("WATCHDOG=1", manager.Receive());
  }
}

TEST(ServiceNotifier, MonotonicMicrosAdvances) {
  const uint64_t a = MonotonicMicros();
  EXPECT_GT(a, 0u);
  EXPECT_GE(MonotonicMicros(), a);
}

}  // namespace
}  // namespace denormd
