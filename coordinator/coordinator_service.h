#pragma once

// gRPC adapters of the coordinator: the task control plane
// (cohort.v1.Coordinator) and the Admin API (cohort.v1.Admin). Each handler
// authenticates, then does microseconds of work in the ClusterManager.

#include <functional>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/v1/coordinator.grpc.pb.h"
#include "common/log_buffer.h"
#include "coordinator/cluster_manager.h"
#include "coordinator/job_manager.h"
#include "coordinator/ps_status_reader.h"
#include "coordinator/store_manager.h"
#include "rpc/auth.h"
#include "rpc/security.h"
#include "rpc/stream_pump.h"

namespace cohort::coordinator {

// `manager` and `auth` are not owned and must outlive the service.
// Thread-safe.
class CoordinatorService final : public v1::Coordinator::CallbackService {
 public:
  CoordinatorService(ClusterManager* manager, const rpc::Authenticator* auth);

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* Deregister(
      grpc::CallbackServerContext* context,
      const v1::DeregisterRequest* request,
      v1::DeregisterResponse* response) override;

 private:
  ClusterManager* const manager_;
  const rpc::Authenticator* const auth_;
};

// Facts about the coordinator itself that the Admin API reports.
struct CoordinatorIdentity {
  std::string launch_mode;
  int64_t incarnation = 0;
  std::string cluster_uid;
  absl::Time started;
};

// What StreamLogs reads: the coordinator's own log, and the tasks' through
// `security`; jobs name their tasks. Not owned. Without a pump (an admin
// service alone, in tests), StreamLogs is UNIMPLEMENTED.
struct LogAccess {
  const LogBuffer* own_log = nullptr;
  const JobManager* jobs = nullptr;
  rpc::StreamPump* pump = nullptr;
  rpc::Security security;
};

// `manager`, `auth` and `ps_reader` are not owned. GetClusterState reads
// each READY ps task's shard live through `ps_reader`, so that a status
// taken right after a job shows what the shards hold now; a ps that does
// not answer within the reader's timeout keeps its last heartbeat's state.
// Thread-safe.
class AdminService final : public v1::Admin::CallbackService {
 public:
  // `store` may be null (no store keys shown).
  AdminService(ClusterManager* manager, const rpc::Authenticator* auth,
               PsStatusReader* ps_reader, const StoreManager* store,
               CoordinatorIdentity identity, LogAccess logs = {});

  grpc::ServerUnaryReactor* GetClusterState(
      grpc::CallbackServerContext* context,
      const v1::GetClusterStateRequest* request,
      v1::ClusterState* response) override;
  grpc::ServerWriteReactor<v1::LogChunk>* StreamLogs(
      grpc::CallbackServerContext* context,
      const v1::StreamLogsRequest* request) override;

  // The address is known only once the server is bound, after the service
  // was registered.
  void set_address(std::string address);
  void set_metrics_address(std::string address);

 private:
  ClusterManager* const manager_;
  const rpc::Authenticator* const auth_;
  PsStatusReader* const ps_reader_;
  const StoreManager* const store_;
  const CoordinatorIdentity identity_;
  const LogAccess logs_;
  absl::Mutex mu_;
  std::string address_ ABSL_GUARDED_BY(mu_);
  std::string metrics_address_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::coordinator
