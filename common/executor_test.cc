#include "common/executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "absl/synchronization/notification.h"

namespace cohort {
namespace {

TEST(ExecutorTest, RunsEveryPostedClosureBeforeShutdownReturns) {
  std::atomic<int> ran{0};
  Executor executor(2, "test");
  for (int i = 0; i < 100; ++i) executor.Post([&] { ++ran; });
  executor.Shutdown();
  EXPECT_EQ(ran.load(), 100);
}

TEST(ExecutorTest, OneThreadRunsInPostingOrder) {
  std::vector<int> order;
  Executor executor(1, "test");
  for (int i = 0; i < 10; ++i)
    executor.Post([&order, i] { order.push_back(i); });
  executor.Shutdown();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(ExecutorTest, AfterShutdownWorkRunsOnTheCaller) {
  Executor executor(1, "test");
  executor.Shutdown();
  bool ran = false;
  executor.Post([&] { ran = true; });
  EXPECT_TRUE(ran);
}

TEST(ExecutorTest, ASlowClosureDoesNotHoldUpTheOtherThread) {
  Executor executor(2, "test");
  absl::Notification release, fast_done;
  executor.Post([&] { release.WaitForNotification(); });
  executor.Post([&] { fast_done.Notify(); });
  EXPECT_TRUE(fast_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  release.Notify();
}

TEST(ExecutorTest, QueuedCountsOnlyWhatHasNotStarted) {
  Executor executor(1, "test");
  absl::Notification started, release;
  executor.Post([&] {
    started.Notify();
    release.WaitForNotificationWithTimeout(absl::Seconds(30));
  });
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(absl::Seconds(30)));
  executor.Post([] {});
  executor.Post([] {});
  EXPECT_EQ(executor.Queued(), 2u);
  release.Notify();
  executor.Shutdown();
  EXPECT_EQ(executor.Queued(), 0u);
}

}  // namespace
}  // namespace cohort
