#include "collective/transports/completion_loop.h"

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace cohort::collective {
namespace {

// A completion that records the thread it ran on.
struct Recorded {
  std::atomic<bool> ran{false};
  std::thread::id on;
  absl::Notification done;
  CompletionTag tag{[this](bool) {
    on = std::this_thread::get_id();
    ran = true;
    done.Notify();
  }};
};

// An alarm that completes `tag` now.
void CompleteNow(grpc::Alarm& alarm, grpc::CompletionQueue& cq, void* tag) {
  alarm.Set(&cq, gpr_now(GPR_CLOCK_REALTIME), tag);
}

TEST(CompletionLoopTest, AWaitingThreadRunsTheCompletionsItself) {
  grpc::CompletionQueue cq;
  {
    CompletionLoop loop(&cq);
    // The loop's thread polls until a wait comes, then leaves the queue to
    // waits that follow each other closely: one of these runs its own.
    bool ran_here = false;
    for (int i = 0; i < 100 && !ran_here; ++i) {
      Recorded recorded;
      grpc::Alarm alarm;
      CompleteNow(alarm, cq, recorded.tag.tag());
      loop.RunUntil([&] { return recorded.ran.load(); },
                    absl::Now() + absl::Seconds(30));
      ASSERT_TRUE(recorded.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
      ran_here = recorded.on == std::this_thread::get_id();
    }
    EXPECT_TRUE(ran_here);
    cq.Shutdown();
  }
}

TEST(CompletionLoopTest, WithNoWaitingThreadTheLoopRunsThem) {
  grpc::CompletionQueue cq;
  {
    CompletionLoop loop(&cq);
    Recorded recorded;
    grpc::Alarm alarm;
    CompleteNow(alarm, cq, recorded.tag.tag());
    ASSERT_TRUE(recorded.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
    EXPECT_NE(recorded.on, std::this_thread::get_id());
    cq.Shutdown();
  }
}

TEST(CompletionLoopTest, AWaitEndsAtItsDeadlineWithNothingToRun) {
  grpc::CompletionQueue cq;
  {
    CompletionLoop loop(&cq);
    const absl::Time deadline = absl::Now() + absl::Milliseconds(100);
    loop.RunUntil([] { return false; }, deadline);
    EXPECT_GE(absl::Now(), deadline);
    cq.Shutdown();
  }
}

}  // namespace
}  // namespace cohort::collective
