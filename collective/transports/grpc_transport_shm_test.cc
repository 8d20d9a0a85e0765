// Ring neighbours on one host: their data goes through shared memory, and
// its errors name ranks as the gRPC path's do.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "collective/algorithmic_communicator.h"
#include "collective/local_store.h"
#include "collective/transports/grpc_transport_testing.h"

namespace cohort::collective {
namespace {

using ::testing::HasSubstr;

TEST(GrpcTransportShmTest, AWaitOnTheRingThatRunsOutNamesTheNeighbour) {
  LocalStore store;
  auto transports =
      CreatePair(store, "shm-wait", [](int rank, GrpcTransportOptions& o) {
        o.label = rank == 0 ? "chief:0" : "worker:0";
      });
  ASSERT_TRUE(transports.ok()) << transports.status();
  ASSERT_EQ((*transports)[0]->next_link(), "shm");

  // Rank 0 never sends: rank 1's wait ends at its deadline, naming rank 0
  // and the message.
  const Envelope envelope{.tag = {4, 2, 0}, .signature = "allreduce f32[8]"};
  float data[8];
  const absl::Status status = (*transports)[1]->Recv(
      0, envelope, data, sizeof(data), absl::Now() + absl::Milliseconds(200));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("no message from rank 0 (chief:0 at 127.0.0.1:"));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("for allreduce f32[8] (sequence 4, step 2) before the "
                        "deadline (over shared memory)"));
}

TEST(GrpcTransportShmTest, ARingSmallerThanTwoWindowsIsRefused) {
  LocalStore store;
  const absl::StatusOr<std::unique_ptr<GrpcTransport>> transport =
      GrpcTransport::Create(
          {.group = "shm-small", .shm_capacity = kMinShmCapacity / 2}, store);
  EXPECT_EQ(transport.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(transport.status().message()),
              HasSubstr("shm_capacity 4194304 is below the smallest"));
}

// Each chunk in the ring carries a frame: with tiny chunks the frames would
// outgrow the ring's spare half, and both ranks, each sending before it
// receives, would wait on each other until the deadline.
TEST(GrpcTransportShmTest, TinyChunksStillFitTheRing) {
  LocalStore store;
  auto transports = CreatePair(store, "shm-tiny");
  ASSERT_TRUE(transports.ok()) << transports.status();
  ASSERT_EQ((*transports)[0]->next_link(), "shm");

  constexpr size_t kCount = size_t{4} << 20;  // 16 MiB: four windows
  std::vector<std::vector<float>> data(2);
  std::vector<absl::Status> results(2);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    data[rank].assign(kCount, static_cast<float>(rank + 1));
    ranks.emplace_back([&, rank] {
      AlgorithmicCommunicator comm(
          std::move((*transports)[rank]),
          {.timeout = absl::Seconds(60), .chunk_bytes = 64});
      results[rank] = comm.AllReduce(data[rank].data(), kCount, DType::kFloat32,
                                     ReduceOp::kSum);
    });
  }
  for (std::thread& rank : ranks) rank.join();
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << "rank " << rank << ": " << results[rank];
    EXPECT_EQ(data[rank].front(), 3.0f);
    EXPECT_EQ(data[rank].back(), 3.0f);
  }
}

}  // namespace
}  // namespace cohort::collective
