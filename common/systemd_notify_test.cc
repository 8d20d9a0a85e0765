#include "common/systemd_notify.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "tests/testing/fake_notify_socket.h"

namespace cohort {
namespace {

using ::cohort::testing::FakeNotifySocket;

TEST(SystemdWatchdogTest, NoWatchdogWasAskedFor) {
  FakeNotifySocket socket(::testing::TempDir() + "/watchdog.notify");
  unsetenv("WATCHDOG_USEC");
  EXPECT_EQ(SystemdWatchdog::Start([](absl::Duration) { return true; }),
            nullptr);
}

TEST(SystemdWatchdogTest, FedWhileAliveWithAQuarterOfTheIntervalToAnswer) {
  FakeNotifySocket socket(::testing::TempDir() + "/watchdog.notify");
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
  FakeNotifySocket socket(::testing::TempDir() + "/watchdog.notify");
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
