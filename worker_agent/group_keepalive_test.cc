#include "worker_agent/group_keepalive.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "collective/algorithmic_communicator.h"
#include "collective/transports/local_transport.h"
#include "tests/testing/status_matchers.h"

namespace cohort::agent {
namespace {

using ::cohort::testing::StatusIs;
using ::testing::HasSubstr;

constexpr absl::Duration kCollectiveTimeout = absl::Seconds(1);

// Runs KeepGroupAliveDuring on `works.size()` ranks of a real group whose
// collectives time out after kCollectiveTimeout; the statuses by rank.
std::vector<absl::Status> RunGroup(
    std::vector<std::function<absl::Status()>> works,
    absl::Duration limit = absl::Hours(1)) {
  const int n = static_cast<int>(works.size());
  collective::LocalHub hub(n);
  std::vector<std::unique_ptr<collective::Communicator>> comms;
  for (int r = 0; r < n; ++r) {
    comms.push_back(std::make_unique<collective::AlgorithmicCommunicator>(
        hub.Connect(r),
        collective::CommunicatorOptions{.timeout = kCollectiveTimeout}));
  }
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      statuses[r] = KeepGroupAliveDuring(
          std::move(works[r]),
          [&](int64_t* round) {
            return comms[r]->AllReduce(round, 1, collective::DType::kInt64,
                                       collective::ReduceOp::kMax);
          },
          {.interval = kCollectiveTimeout / 4,
           .limit = limit,
           .what = "writing checkpoint 7",
           .rank = r});
    });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

TEST(KeepGroupAliveTest, WorkLongerThanTheCollectiveTimeoutFailsNoRank) {
  const std::vector<absl::Status> statuses =
      RunGroup({nullptr,
                [] {
                  absl::SleepFor(3 * kCollectiveTimeout);
                  return absl::OkStatus();
                },
                nullptr});
  for (const absl::Status& s : statuses) EXPECT_OK(s);
}

TEST(KeepGroupAliveTest, TheWorksErrorIsItsOwnRanks) {
  const std::vector<absl::Status> statuses = RunGroup(
      {[] { return absl::ResourceExhaustedError("disk full"); }, nullptr});
  EXPECT_THAT(statuses[0],
              StatusIs(absl::StatusCode::kResourceExhausted, "disk full"));
  EXPECT_OK(statuses[1]);
}

TEST(KeepGroupAliveTest, WorkPastItsLimitFailsEveryRankNamingIt) {
  // Released at the end, so that the work's thread does not outlive the
  // test by long.
  auto release = std::make_shared<absl::Notification>();
  const std::vector<absl::Status> statuses =
      RunGroup({nullptr,
                [release] {
                  release->WaitForNotificationWithTimeout(absl::Seconds(60));
                  return absl::OkStatus();
                }},
               /*limit=*/absl::Milliseconds(500));
  release->Notify();
  for (const absl::Status& s : statuses) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kDeadlineExceeded,
                            HasSubstr("writing checkpoint 7 took longer than "
                                      "500ms on replica 1")));
  }
}

}  // namespace
}  // namespace cohort::agent
