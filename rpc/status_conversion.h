#pragma once

// absl::Status <-> grpc::Status, one-to-one: the canonical codes are the same
// sixteen in both libraries, and the message travels unchanged.

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace cohort::rpc {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace cohort::rpc
