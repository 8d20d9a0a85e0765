#include "worker_agent/central_storage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace cohort::agent {
namespace {

using ::testing::HasSubstr;

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

TEST(CentralStorageTest, OthersGetReplicaZerosBuffersInCreationOrder) {
  CentralStorage storage(2);
  double w = 0, b = 0;
  std::thread replica0([&] {
    storage.Publish({"w", &w, sizeof(w)});
    storage.Publish({"b", &b, sizeof(b)});
  });
  absl::StatusOr<SharedBuffer> second = storage.Await(1, Soon());
  replica0.join();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->name, "b");
  EXPECT_EQ(second->data, &b);
  EXPECT_EQ(storage.Await(0, Soon())->data, &w);
}

TEST(CentralStorageTest, BarrierHoldsUntilEveryReplicaArrivesRoundAfterRound) {
  CentralStorage storage(3);
  std::vector<absl::Status> statuses(3 * 4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      for (int round = 0; round < 4; ++round) {
        statuses[r * 4 + round] = storage.Barrier(Soon());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

TEST(CentralStorageTest, WaitsEndAtTheirDeadlineOrAtOnceOnAbort) {
  CentralStorage storage(2);
  const absl::Status late =
      storage.Barrier(absl::Now() + absl::Milliseconds(20));
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(late.message(), HasSubstr("1 of 2 local replicas"));
  EXPECT_EQ(
      storage.Await(0, absl::Now() + absl::Milliseconds(20)).status().code(),
      absl::StatusCode::kDeadlineExceeded);

  CentralStorage aborted(2);
  absl::Status barrier, await;
  std::thread waiter([&] {
    barrier = aborted.Barrier(absl::Now() + absl::Seconds(30));
    await = aborted.Await(0, absl::Now() + absl::Seconds(30)).status();
  });
  const absl::Time start = absl::Now();
  aborted.Abort(absl::AbortedError("replica 1 failed"));
  waiter.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(barrier.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(await.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(aborted.Barrier(Soon()).code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace cohort::agent
