#include "rpc/status_conversion.h"

namespace cohort::rpc {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return FromWireStatus(static_cast<int>(status.error_code()),
                        status.error_message());
}

absl::Status FromWireStatus(int code, const std::string& message) {
  if (code == 0) return absl::OkStatus();
  const absl::StatusCode mapped =
      (code > 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated))
          ? static_cast<absl::StatusCode>(code)
          : absl::StatusCode::kUnknown;
  return absl::Status(mapped, message);
}

}  // namespace cohort::rpc
