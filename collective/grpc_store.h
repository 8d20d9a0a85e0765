#pragma once

// The Store served by the coordinator (cohort.v1.Store), over gRPC.

#include <memory>
#include <string>

#include "cohort/v1/store.grpc.pb.h"
#include "collective/store.h"
#include "rpc/channel.h"

namespace cohort::collective {

// Thread-safe.
class GrpcStore final : public Store {
 public:
  GrpcStore(std::string address, rpc::Security security);

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  absl::Duration timeout) override;
  absl::Status Barrier(const std::string& name, int participants, int rank,
                       absl::Duration timeout) override;

 private:
  rpc::Connection connection_;
  std::unique_ptr<v1::Store::Stub> stub_;
};

}  // namespace cohort::collective
