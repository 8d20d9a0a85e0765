#include "coordinator/coordinator_service.h"

#include <unistd.h>

#include "common/steady_time.h"
#include "common/version.h"
#include "coordinator/log_relay.h"
#include "rpc/status_conversion.h"
#include "rpc/unary.h"
#include "spdlog/spdlog.h"

namespace cohort::coordinator {

CoordinatorService::CoordinatorService(ClusterManager* manager,
                                       const rpc::Authenticator* auth)
    : manager_(manager), auth_(auth) {}

grpc::ServerUnaryReactor* CoordinatorService::Register(
    grpc::CallbackServerContext* context, const v1::RegisterRequest* request,
    v1::RegisterResponse* response) {
  return rpc::HandleUnary(context, auth_, [&]() -> absl::Status {
    absl::StatusOr<v1::RegisterResponse> result =
        manager_->Register(request->report(), SteadyNow());
    if (!result.ok()) return result.status();
    *response = std::move(*result);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* CoordinatorService::Heartbeat(
    grpc::CallbackServerContext* context, const v1::HeartbeatRequest* request,
    v1::HeartbeatResponse* response) {
  return rpc::HandleUnary(context, auth_, [&] {
    return manager_->Heartbeat(*request, SteadyNow(), absl::Now());
  });
}

grpc::ServerUnaryReactor* CoordinatorService::Deregister(
    grpc::CallbackServerContext* context, const v1::DeregisterRequest* request,
    v1::DeregisterResponse* response) {
  return rpc::HandleUnary(context, auth_, [&] {
    return manager_->Deregister(*request, SteadyNow());
  });
}

AdminService::AdminService(ClusterManager* manager,
                           const rpc::Authenticator* auth,
                           PsStatusReader* ps_reader, const StoreManager* store,
                           CoordinatorIdentity identity, LogAccess logs)
    : manager_(manager),
      auth_(auth),
      ps_reader_(ps_reader),
      store_(store),
      identity_(std::move(identity)),
      logs_(std::move(logs)) {}

void AdminService::set_address(std::string address) {
  absl::MutexLock lock(&mu_);
  address_ = std::move(address);
}

void AdminService::set_metrics_address(std::string address) {
  absl::MutexLock lock(&mu_);
  metrics_address_ = std::move(address);
}

grpc::ServerUnaryReactor* AdminService::GetClusterState(
    grpc::CallbackServerContext* context,
    const v1::GetClusterStateRequest* request, v1::ClusterState* response) {
  return rpc::ParkUnary(context, auth_, [&](auto finish) {
    const absl::Time now = SteadyNow();
    {
      absl::MutexLock lock(&mu_);
      response->set_coordinator_address(address_);
      response->set_coordinator_metrics_address(metrics_address_);
    }
    response->set_version(kVersion);
    response->set_uptime_ms(absl::ToInt64Milliseconds(now - identity_.started));
    response->set_launch_mode(identity_.launch_mode);
    response->set_cluster_spec_json(manager_->spec().ToJson());
    response->set_coordinator_pid(getpid());
    response->set_incarnation(identity_.incarnation);
    response->set_cluster_uid(identity_.cluster_uid);
    if (store_ != nullptr) {
      response->set_store_keys(static_cast<int64_t>(store_->num_keys()));
    }
    std::vector<std::string> ps_addresses;
    std::vector<v1::TaskStatus*> ps_tasks;
    for (v1::TaskStatus& task : manager_->Snapshot(now)) {
      v1::TaskStatus* added = response->add_tasks();
      *added = std::move(task);
      if (added->task().type() == kPs && added->state() == v1::READY) {
        ps_addresses.push_back(added->address());
        ps_tasks.push_back(added);
      }
    }
    ps_reader_->ReadAll(
        ps_addresses, [ps_tasks, finish](PsStatusReader::Results results) {
          for (size_t i = 0; i < results.size(); ++i) {
            if (results[i].ok() && results[i]->report().has_ps()) {
              *ps_tasks[i]->mutable_ps() = results[i]->report().ps();
            } else if (!results[i].ok()) {
              spdlog::debug("showing the last heartbeat's shard state: {}",
                            results[i].status().ToString());
            }
          }
          finish(absl::OkStatus());
        });
  });
}

grpc::ServerWriteReactor<v1::LogChunk>* AdminService::StreamLogs(
    grpc::CallbackServerContext* context,
    const v1::StreamLogsRequest* request) {
  if (absl::Status status = auth_->Check(*context); !status.ok()) {
    return new rpc::RefusedWriter<v1::LogChunk>(rpc::ToGrpcStatus(status));
  }
  if (logs_.pump == nullptr) {
    return new rpc::RefusedWriter<v1::LogChunk>(grpc::Status(
        grpc::StatusCode::UNIMPLEMENTED, "this server relays no logs"));
  }
  absl::StatusOr<LogRelayPlan> plan = PlanLogRelay(
      *request, *manager_, *logs_.jobs, logs_.own_log, logs_.security);
  if (!plan.ok()) {
    return new rpc::RefusedWriter<v1::LogChunk>(
        rpc::ToGrpcStatus(plan.status()));
  }
  auto* relay = new LogRelay(logs_.pump, *std::move(plan));
  relay->Begin();
  return relay;
}

}  // namespace cohort::coordinator
