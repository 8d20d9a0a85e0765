#include "worker_agent/staged_communicator.h"

#include <gtest/gtest.h>

#include <thread>

#include "collective/algorithmic_communicator.h"
#include "collective/transports/local_transport.h"

namespace cohort::agent {
namespace {

// On CPU devices the staging copies are plain copies: the results must be
// the wrapped communicator's, for every collective that stages.
TEST(StagedCommunicatorTest, StagesEveryCollectiveAndKeepsItsResult) {
  constexpr int kRanks = 3;
  collective::LocalHub hub(kRanks);
  std::vector<std::unique_ptr<StagedCommunicator>> comms;
  for (int r = 0; r < kRanks; ++r) {
    comms.push_back(std::make_unique<StagedCommunicator>(
        std::make_unique<collective::AlgorithmicCommunicator>(hub.Connect(r)),
        Device{}));
  }
  std::vector<absl::Status> statuses(kRanks);
  std::vector<std::vector<float>> reduced(kRanks), rooted(kRanks),
      broadcast(kRanks), gathered(kRanks), scattered(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      StagedCommunicator& comm = *comms[r];
      const float x = 1.0f + r;
      reduced[r] = {x, 2 * x};
      rooted[r] = {x};
      broadcast[r] = {x};
      gathered[r].assign(kRanks, 0);
      scattered[r].assign(1, 0);
      const std::vector<float> to_scatter = {x, 10 * x, 100 * x};
      absl::Status s =
          comm.AllReduce(reduced[r].data(), 2, DType::kFloat32, ReduceOp::kSum);
      if (s.ok()) {
        s = comm.Reduce(rooted[r].data(), 1, DType::kFloat32, ReduceOp::kMax,
                        1);
      }
      if (s.ok())
        s = comm.Broadcast(broadcast[r].data(), 1, DType::kFloat32, 2);
      if (s.ok()) {
        s = comm.AllGather(&x, gathered[r].data(), 1, DType::kFloat32);
      }
      if (s.ok()) {
        s = comm.ReduceScatter(to_scatter.data(), scattered[r].data(), 1,
                               DType::kFloat32, ReduceOp::kSum);
      }
      if (s.ok()) s = comm.Barrier();
      statuses[r] = s;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << statuses[r];
    EXPECT_EQ(reduced[r], (std::vector<float>{6, 12})) << r;
    EXPECT_EQ(rooted[r], (std::vector<float>{r == 1 ? 3.0f : 1.0f + r})) << r;
    EXPECT_EQ(broadcast[r], (std::vector<float>{3})) << r;
    EXPECT_EQ(gathered[r], (std::vector<float>{1, 2, 3})) << r;
    const float sums[] = {6, 60, 600};
    EXPECT_EQ(scattered[r], (std::vector<float>{sums[r]})) << r;
  }
}

}  // namespace
}  // namespace cohort::agent
