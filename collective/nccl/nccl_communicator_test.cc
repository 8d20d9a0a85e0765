// NcclCommunicator on real GPUs: one rank per visible device, as threads.
// Skips cleanly where there is no CUDA device.

#include "collective/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collective/local_store.h"
#include "gtest/gtest.h"
#include "tests/testing/collective_reference.h"

namespace cohort::collective {
namespace {

int DeviceCount() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

TEST(NcclCommunicatorTest, AllReduceMatchesTheReferenceOnEveryDevice) {
  const int n = DeviceCount();
  if (n == 0) GTEST_SKIP() << "no CUDA device";
  LocalStore store;
  const size_t count = 1 << 20;
  for (const testing::DTypeOp& pair : testing::AllDTypeOps()) {
    const std::vector<char> expected =
        testing::ReferenceReduction(n, count, pair.dtype, pair.op);
    std::vector<absl::Status> results(n);
    std::vector<std::vector<char>> outputs(n);
    std::vector<std::thread> threads;
    const std::string group = absl::StrCat("nccl-", DTypeName(pair.dtype), "-",
                                           ReduceOpName(pair.op));
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        auto comm = NcclCommunicator::Create(
            {.group = group, .rank = r, .size = n, .device = r}, store);
        if (!comm.ok()) {
          results[r] = comm.status();
          return;
        }
        std::vector<char> host = testing::ReferenceInputs(r, count, pair.dtype);
        void* device = nullptr;
        cudaMalloc(&device, host.size());
        cudaMemcpy(device, host.data(), host.size(), cudaMemcpyHostToDevice);
        results[r] = (*comm)->AllReduce(device, count, pair.dtype, pair.op);
        outputs[r].resize(host.size());
        cudaMemcpy(outputs[r].data(), device, host.size(),
                   cudaMemcpyDeviceToHost);
        cudaFree(device);
      });
    }
    for (auto& thread : threads) thread.join();
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(results[r].ok()) << results[r];
      // NCCL's MEAN rounds differently from ours; compare the exact ops.
      if (pair.op != ReduceOp::kMean) {
        EXPECT_TRUE(outputs[r] == expected) << group << " rank " << r;
      }
    }
  }
}

TEST(NcclCommunicatorTest, MissingRankEndsInADeadline) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  LocalStore store;
  // Rank 1 of 2 never joins: initialisation must end at the deadline.
  auto comm =
      NcclCommunicator::Create({.group = "lonely",
                                .rank = 0,
                                .size = 2,
                                .device = 0,
                                .communicator = {.timeout = absl::Seconds(3)}},
                               store);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded)
      << comm.status();
}

// The attempt a group forms for ends (its store is aborted) while a peer
// never joins: initialisation ends then, with the store's reason, not at
// the deadline.
TEST(NcclCommunicatorTest, AnAbortedStoreEndsInitialisation) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  // A LocalStore whose attempt ends half a second in.
  class AbortingStore : public Store {
   public:
    absl::Status Set(const std::string& key,
                     const std::string& value) override {
      return inner_.Set(key, value);
    }
    absl::StatusOr<std::string> Get(const std::string& key,
                                    absl::Duration timeout) override {
      return inner_.Get(key, timeout);
    }
    absl::Status Barrier(const std::string& name, int participants, int rank,
                         absl::Duration timeout) override {
      return inner_.Barrier(name, participants, rank, timeout);
    }
    absl::Status aborted() const override {
      return absl::Now() < at_ ? absl::OkStatus()
                               : absl::UnavailableError("worker:1 is gone");
    }

   private:
    LocalStore inner_;
    const absl::Time at_ = absl::Now() + absl::Milliseconds(500);
  } store;
  const absl::Time start = absl::Now();
  auto comm =
      NcclCommunicator::Create({.group = "abandoned",
                                .rank = 0,
                                .size = 2,
                                .device = 0,
                                .communicator = {.timeout = absl::Seconds(60)}},
                               store);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().message(), "worker:1 is gone") << comm.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

}  // namespace
}  // namespace cohort::collective
