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

// Rounds come every eighth of it: ample room for a busy machine.
constexpr absl::Duration kCollectiveTimeout = absl::Seconds(2);

// Runs KeepGroupAliveDuring on `works.size()` ranks of a real group whose
// collectives time out after kCollectiveTimeout; the statuses by rank, and
// in `returned`, when given, when each rank returned. Rank 0 aborts the
// group `abort_after` the start, if that is given.
std::vector<absl::Status> RunGroup(
    std::vector<std::function<absl::Status()>> works,
    absl::Duration limit = absl::Hours(1),
    std::vector<absl::Time>* returned = nullptr,
    absl::Duration abort_after = absl::InfiniteDuration()) {
  const int n = static_cast<int>(works.size());
  collective::LocalHub hub(n);
  std::vector<std::unique_ptr<collective::Communicator>> comms;
  for (int r = 0; r < n; ++r) {
    comms.push_back(std::make_unique<collective::AlgorithmicCommunicator>(
        hub.Connect(r),
        collective::CommunicatorOptions{.timeout = kCollectiveTimeout}));
  }
  std::vector<absl::Status> statuses(n);
  std::vector<absl::Time> times(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      statuses[r] = KeepGroupAliveDuring(
          std::move(works[r]),
          [&](int64_t* round) {
            return comms[r]->AllReduce(round, 1, collective::DType::kInt64,
                                       collective::ReduceOp::kMax);
          },
          {.interval = kCollectiveTimeout / 8,
           .limit = limit,
           .what = "writing checkpoint 7",
           .rank = r});
      times[r] = absl::Now();
    });
  }
  if (abort_after != absl::InfiniteDuration()) {
    absl::SleepFor(abort_after);
    comms[0]->Abort(absl::UnavailableError("rank 0 is gone"));
  }
  for (std::thread& t : threads) t.join();
  if (returned != nullptr) *returned = times;
  return statuses;
}

TEST(KeepGroupAliveTest, WorkLongerThanTheCollectiveTimeoutFailsNoRank) {
  const std::vector<absl::Status> statuses =
      RunGroup({nullptr,
                [] {
                  absl::SleepFor(2 * kCollectiveTimeout);
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

// The group stops waiting past the limit; the work's own rank returns only
// once its work has ended, so that nothing it touches goes first.
TEST(KeepGroupAliveTest, WorkPastItsLimitFailsEveryRankNamingIt) {
  absl::Time work_ended;
  std::vector<absl::Time> returned;
  const std::vector<absl::Status> statuses =
      RunGroup({nullptr,
                [&] {
                  absl::SleepFor(absl::Seconds(2));
                  work_ended = absl::Now();
                  return absl::OkStatus();
                }},
               /*limit=*/absl::Milliseconds(500), &returned);
  for (const absl::Status& s : statuses) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kDeadlineExceeded,
                            HasSubstr("writing checkpoint 7 took longer than "
                                      "500ms on replica 1")));
  }
  EXPECT_GE(returned[1], work_ended);
}

// A collective that fails (a peer gone) ends the rounds, not the work.
TEST(KeepGroupAliveTest, AFailedGroupStillWaitsForTheWorkToEnd) {
  absl::Time work_ended;
  std::vector<absl::Time> returned;
  const std::vector<absl::Status> statuses = RunGroup(
      {nullptr,
       [&] {
         absl::SleepFor(2 * kCollectiveTimeout);
         work_ended = absl::Now();
         return absl::OkStatus();
       }},
      absl::Hours(1), &returned, /*abort_after=*/kCollectiveTimeout / 4);
  for (const absl::Status& s : statuses) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable,
                            HasSubstr("rank 0 is gone")));
  }
  EXPECT_LT(returned[0], work_ended);
  EXPECT_GE(returned[1], work_ended);
}

}  // namespace
}  // namespace cohort::agent
