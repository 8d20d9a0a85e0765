#pragma once

// absl::Status <-> grpc::Status, one-to-one: the canonical codes are the same
// sixteen in both libraries, and the message travels unchanged.

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace cohort::rpc {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);
// A status code as a number off the wire, with its message. Codes outside
// the canonical range cannot come from a conforming peer: UNKNOWN.
absl::Status FromWireStatus(int code, const std::string& message);

}  // namespace cohort::rpc
