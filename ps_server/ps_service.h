#pragma once

// The parameter server's gRPC service (cohort.v1.ParameterServer) and the
// report it registers with: its shard id and the memory it holds.

#include "cohort/v1/ps.grpc.pb.h"
#include "rpc/task_runtime.h"

namespace cohort::ps {

// `runtime` is not owned and must outlive the service. Thread-safe.
class PsService final : public v1::ParameterServer::CallbackService {
 public:
  explicit PsService(const rpc::TaskRuntime* runtime);

  v1::TaskReport Report() const;

  grpc::ServerUnaryReactor* GetPsStatus(grpc::CallbackServerContext* context,
                                        const v1::GetPsStatusRequest* request,
                                        v1::PsStatus* response) override;

 private:
  const rpc::TaskRuntime* const runtime_;
};

}  // namespace cohort::ps
