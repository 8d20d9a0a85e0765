#include "rpc/status_conversion.h"

#include "gtest/gtest.h"

namespace cohort::rpc {
namespace {

TEST(StatusConversionTest, OkMapsToOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(StatusConversionTest, EveryCanonicalCodeRoundTripsWithItsMessage) {
  for (int code = 1; code <= 16; ++code) {
    const absl::Status original(static_cast<absl::StatusCode>(code),
                                "worker:1 at 10.0.0.2:2222 is gone");
    const grpc::Status wire = ToGrpcStatus(original);
    EXPECT_EQ(static_cast<int>(wire.error_code()), code);
    EXPECT_EQ(wire.error_message(), "worker:1 at 10.0.0.2:2222 is gone");
    EXPECT_EQ(FromGrpcStatus(wire), original) << "code " << code;
  }
}

TEST(StatusConversionTest, NamedCodesMatch) {
  EXPECT_EQ(ToGrpcStatus(absl::UnavailableError("x")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ToGrpcStatus(absl::AbortedError("x")).error_code(),
            grpc::StatusCode::ABORTED);
  EXPECT_EQ(ToGrpcStatus(absl::UnauthenticatedError("x")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ToGrpcStatus(absl::FailedPreconditionError("x")).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(ToGrpcStatus(absl::DeadlineExceededError("x")).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
}

// A grpc::StatusCode cannot hold 42 (UBSan refuses the cast), so the wire
// number is tested as a number.
TEST(StatusConversionTest, OutOfRangeWireCodeBecomesUnknown) {
  for (int code : {42, -3, 17}) {
    const absl::Status status = FromWireStatus(code, "odd");
    EXPECT_EQ(status.code(), absl::StatusCode::kUnknown) << code;
    EXPECT_EQ(status.message(), "odd");
  }
  EXPECT_EQ(FromWireStatus(5, "gone").code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace cohort::rpc
