#include "common/systemd_notify.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/testing/fake_notify_socket.h"

namespace cohort {
namespace {

using ::cohort::testing::FakeNotifySocket;

// ctest runs each test as its own process, in parallel with others of this
// file: each needs a socket of its own.
std::string SocketPath() {
  return absl::StrCat(::testing::TempDir(), "/watchdog-", getpid(), ".notify");
}

TEST(SystemdWatchdogTest, NoWatchdogWasAskedFor) {
  FakeNotifySocket socket(SocketPath());
  unsetenv("WATCHDOG_USEC");
  EXPECT_EQ(SystemdWatchdog::Start([](absl::Duration) { return true; }),
            nullptr);
}

TEST(SystemdWatchdogTest, FedWhileAliveWithAQuarterOfTheIntervalToAnswer) {
  FakeNotifySocket socket(SocketPath());
  setenv("WATCHDOG_USEC", "400000", 1);
  std::atomic<int64_t> given_ms{0};
  std::unique_ptr<SystemdWatchdog> watchdog =
      SystemdWatchdog::Start([&](absl::Duration timeout) {
        given_ms = absl::ToInt64Milliseconds(timeout);
        return true;
      });
  ASSERT_NE(watchdog, nullptr);
  EXPECT_EQ(watchdog->interval(), absl::Milliseconds(400));
  EXPECT_EQ(socket.Next(absl::Seconds(30)), "WATCHDOG=1");
  EXPECT_EQ(socket.Next(absl::Seconds(30)), "WATCHDOG=1");
  EXPECT_EQ(given_ms.load(), 100);
}

TEST(SystemdWatchdogTest, NotFedWhileTheDaemonDoesNotAnswer) {
  FakeNotifySocket socket(SocketPath());
  setenv("WATCHDOG_USEC", "300000", 1);
  std::atomic<int> asked{0};
  std::atomic<bool> answer{false};
  std::unique_ptr<SystemdWatchdog> watchdog =
      SystemdWatchdog::Start([&](absl::Duration) {
        ++asked;
        return answer.load();
      });
  ASSERT_NE(watchdog, nullptr);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (asked < 3 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_GE(asked.load(), 3);
  EXPECT_EQ(socket.Poll(), "") << "fed although it never answered";
  answer = true;
  EXPECT_EQ(socket.Next(absl::Seconds(30)), "WATCHDOG=1");
}

}  // namespace
}  // namespace cohort
