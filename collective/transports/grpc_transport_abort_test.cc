// A group's abort reaches every peer with its reason, whatever text the
// reason holds: it often quotes user code.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "collective/local_store.h"
#include "collective/transports/grpc_transport_testing.h"

namespace cohort::collective {
namespace {

using ::testing::HasSubstr;

TEST(GrpcTransportAbortTest, AReasonThatIsNotUtf8StillReachesThePeers) {
  LocalStore store;
  auto transports =
      CreatePair(store, "abort-text",
                 [](int, GrpcTransportOptions& o) { o.shared_memory = false; });
  ASSERT_TRUE(transports.ok()) << transports.status();

  (*transports)[0]->Abort(
      absl::InternalError("step failed: bad byte \xff in a name"));
  // Well before the deadline: the notice, not the wait, ends the receive.
  const absl::Time start = absl::Now();
  const Envelope envelope{.tag = {1, 0, 0}, .signature = "allreduce f32[4]"};
  float data[4];
  const absl::Status status = (*transports)[1]->Recv(
      0, envelope, data, sizeof(data), start + absl::Seconds(60));
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("aborted the group: step failed: bad byte"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

// An abort given no error still fails the group, this rank included.
TEST(GrpcTransportAbortTest, AnAbortWithAnOkStatusFailsEveryRankAlike) {
  LocalStore store;
  auto transports =
      CreatePair(store, "abort-ok",
                 [](int, GrpcTransportOptions& o) { o.shared_memory = false; });
  ASSERT_TRUE(transports.ok()) << transports.status();

  (*transports)[0]->Abort(absl::OkStatus());
  const absl::Time start = absl::Now();
  const Envelope envelope{.tag = {1, 0, 0}, .signature = "allreduce f32[4]"};
  float data[4];
  for (int rank : {0, 1}) {
    const absl::Status status = (*transports)[rank]->Recv(
        1 - rank, envelope, data, sizeof(data), start + absl::Seconds(20));
    EXPECT_EQ(status.code(), absl::StatusCode::kUnknown)
        << "rank " << rank << ": " << status;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr("aborted the group: the group was aborted without a "
                          "reason"));
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
}

}  // namespace
}  // namespace cohort::collective
