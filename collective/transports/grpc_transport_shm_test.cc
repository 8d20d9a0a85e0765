// Ring neighbours on one host: their data goes through shared memory, and
// its errors name ranks as the gRPC path's do.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "collective/local_store.h"
#include "collective/transports/grpc_transport_testing.h"

namespace cohort::collective {
namespace {

using ::testing::HasSubstr;

TEST(GrpcTransportShmTest, AWaitOnTheRingThatRunsOutNamesTheNeighbour) {
  LocalStore store;
  auto transports = CreateGroupInThreads(store, 2, [](int rank) {
    return GrpcTransportOptions{.group = "shm-wait",
                                .rank = rank,
                                .size = 2,
                                .label = rank == 0 ? "chief:0" : "worker:0",
                                .connect_timeout = absl::Seconds(30)};
  });
  ASSERT_TRUE(transports[0].ok()) << transports[0].status();
  ASSERT_TRUE(transports[1].ok()) << transports[1].status();
  ASSERT_EQ((*transports[0])->next_link(), "shm");

  // Rank 0 never sends: rank 1's wait ends at its deadline, naming rank 0
  // and the message.
  const Envelope envelope{.tag = {4, 2, 0}, .signature = "allreduce f32[8]"};
  float data[8];
  const absl::Status status = (*transports[1])
                                  ->Recv(0, envelope, data, sizeof(data),
                                         absl::Now() + absl::Milliseconds(200));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("no message from rank 0 (chief:0 at 127.0.0.1:"));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("for allreduce f32[8] (sequence 4, step 2) before the "
                        "deadline (over shared memory)"));
}

}  // namespace
}  // namespace cohort::collective
