#include "coordinator/coordinator_service.h"

#include <unistd.h>

#include "common/version.h"
#include "rpc/unary.h"

namespace cohort::coordinator {

CoordinatorService::CoordinatorService(ClusterManager* manager,
                                       const rpc::Authenticator* auth)
    : manager_(manager), auth_(auth) {}

grpc::ServerUnaryReactor* CoordinatorService::Register(
    grpc::CallbackServerContext* context, const v1::RegisterRequest* request,
    v1::RegisterResponse* response) {
  return rpc::HandleUnary(context, auth_, [&]() -> absl::Status {
    absl::StatusOr<v1::RegisterResponse> result =
        manager_->Register(request->report(), absl::Now());
    if (!result.ok()) return result.status();
    *response = std::move(*result);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* CoordinatorService::Heartbeat(
    grpc::CallbackServerContext* context, const v1::HeartbeatRequest* request,
    v1::HeartbeatResponse* response) {
  return rpc::HandleUnary(context, auth_, [&] {
    return manager_->Heartbeat(*request, absl::Now());
  });
}

grpc::ServerUnaryReactor* CoordinatorService::Deregister(
    grpc::CallbackServerContext* context, const v1::DeregisterRequest* request,
    v1::DeregisterResponse* response) {
  return rpc::HandleUnary(context, auth_, [&] {
    return manager_->Deregister(*request, absl::Now());
  });
}

AdminService::AdminService(ClusterManager* manager,
                           const rpc::Authenticator* auth,
                           CoordinatorIdentity identity)
    : manager_(manager), auth_(auth), identity_(std::move(identity)) {}

void AdminService::set_address(std::string address) {
  absl::MutexLock lock(&mu_);
  address_ = std::move(address);
}

grpc::ServerUnaryReactor* AdminService::GetClusterState(
    grpc::CallbackServerContext* context,
    const v1::GetClusterStateRequest* request, v1::ClusterState* response) {
  return rpc::HandleUnary(context, auth_, [&] {
    const absl::Time now = absl::Now();
    {
      absl::MutexLock lock(&mu_);
      response->set_coordinator_address(address_);
    }
    response->set_version(kVersion);
    response->set_uptime_ms(absl::ToInt64Milliseconds(now - identity_.started));
    response->set_launch_mode(identity_.launch_mode);
    response->set_cluster_spec_json(manager_->spec().ToJson());
    response->set_coordinator_pid(getpid());
    response->set_incarnation(identity_.incarnation);
    for (v1::TaskStatus& task : manager_->Snapshot(now)) {
      *response->add_tasks() = std::move(task);
    }
    return absl::OkStatus();
  });
}

}  // namespace cohort::coordinator
