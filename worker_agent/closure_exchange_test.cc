#include "worker_agent/closure_exchange.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>

#include "tests/testing/status_matchers.h"
#include "worker_agent/closure_only_coordinator.h"

namespace cohort::agent {
namespace {

using ::cohort::testing::StatusIs;

// Answers RunClosures from a script; the last answer repeats.
class ScriptedCoordinator final : public ClosureOnlyCoordinator {
 public:
  explicit ScriptedCoordinator(
      std::deque<absl::StatusOr<v1::ClosureResponse>> answers)
      : answers_(std::move(answers)) {}

  int calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

  absl::StatusOr<v1::ClosureResponse> RunClosures(const v1::ClosureRequest&,
                                                  absl::Duration) override {
    absl::MutexLock lock(&mu_);
    ++calls_;
    absl::StatusOr<v1::ClosureResponse> answer = answers_.front();
    if (answers_.size() > 1) answers_.pop_front();
    return answer;
  }

 private:
  mutable absl::Mutex mu_;
  std::deque<absl::StatusOr<v1::ClosureResponse>> answers_ ABSL_GUARDED_BY(mu_);
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
};

v1::ClosureResponse Closures(int64_t id) {
  v1::ClosureResponse response;
  response.add_closures(id);
  return response;
}

const ExchangeOptions kQuick{.first_backoff = absl::Milliseconds(1),
                             .max_backoff = absl::Milliseconds(2)};

TEST(ClosureExchangeTest, RetriesWhileTheCoordinatorIsAway) {
  ScriptedCoordinator coordinator({absl::UnavailableError("connection refused"),
                                   absl::DeadlineExceededError("deadline"),
                                   Closures(7)});
  absl::Notification stop;
  absl::StatusOr<v1::ClosureResponse> response =
      ExchangeClosures(coordinator, {}, stop, kQuick);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->closures(0), 7);
  EXPECT_EQ(coordinator.calls(), 3);
}

TEST(ClosureExchangeTest, ARefusalIsReturnedAtOnce) {
  ScriptedCoordinator coordinator(
      {absl::FailedPreconditionError("job 3 attempt 1 is not running")});
  absl::Notification stop;
  EXPECT_THAT(ExchangeClosures(coordinator, {}, stop, kQuick).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(coordinator.calls(), 1);
}

TEST(ClosureExchangeTest, GivesUpWithTheLastErrorWhenPatienceRunsOut) {
  ScriptedCoordinator coordinator({absl::UnavailableError("unreachable")});
  absl::Notification stop;
  ExchangeOptions options = kQuick;
  options.patience = absl::Milliseconds(500);
  EXPECT_THAT(ExchangeClosures(coordinator, {}, stop, options).status(),
              StatusIs(absl::StatusCode::kUnavailable, "unreachable"));
  EXPECT_GE(coordinator.calls(), 2);
}

TEST(ClosureExchangeTest, AStoppedExecutorStopsWaiting) {
  ScriptedCoordinator coordinator({absl::UnavailableError("unreachable")});
  absl::Notification stop;
  stop.Notify();
  ExchangeOptions options = kQuick;
  options.first_backoff = absl::Hours(1);
  EXPECT_THAT(ExchangeClosures(coordinator, {}, stop, options).status(),
              StatusIs(absl::StatusCode::kCancelled));
}

}  // namespace
}  // namespace cohort::agent
