#pragma once

// Wiring of cohort-coordinator: state dir, ClusterManager, Supervisor, the
// job table and its loop, the gRPC server with the Coordinator, Admin, Store,
// Jobs and JobControl services.

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/cluster_spec.h"
#include "common/file_lock.h"
#include "common/metrics.h"
#include "coordinator/cluster_manager.h"
#include "coordinator/coordinator_service.h"
#include "coordinator/job_loop.h"
#include "coordinator/job_manager.h"
#include "coordinator/job_service.h"
#include "coordinator/library_store.h"
#include "coordinator/state_store.h"
#include "coordinator/store_manager.h"
#include "coordinator/store_service.h"
#include "coordinator/supervisor.h"
#include "rpc/auth.h"
#include "rpc/metrics_http.h"
#include "rpc/server.h"

namespace cohort::coordinator {

enum class LaunchMode { kLocal, kNone };

struct CoordinatorConfig {
  // The spec to run; when unset, the one kept in state_dir.
  std::optional<ClusterSpec> spec;
  rpc::ServerOptions server;
  bool listen_given = false;  // else the address kept in state_dir is reused
  rpc::SecurityFiles security_files;  // passed on to launched tasks
  std::string state_dir;              // empty: keep no state
  LaunchMode launch = LaunchMode::kLocal;
  ClusterManagerOptions cluster;
  SupervisorOptions supervisor;
  // Jobs' defaults; checkpoint_root is set from the state dir.
  JobManagerOptions jobs;
  std::string agent_binary;  // default: cohort-agent beside this binary
  std::string ps_binary;     // default: cohort-ps beside this binary
  int cpu_devices = 1;       // --cpu_devices for launched agents
  // --stop_timeout for launched agents.
  absl::Duration agent_stop_timeout = absl::Minutes(2);
  // --orphan_timeout for launched tasks: they exit when this coordinator has
  // been gone that long. Zero: never.
  absl::Duration task_orphan_timeout = absl::Seconds(60);
  // Start a new cluster in state_dir: stop the tasks a previous coordinator
  // of it left running, and set its state aside instead of resuming it.
  bool new_cluster = false;
  std::string log_level = "info";
  std::string task_log_dir;  // empty: state_dir/logs, or inherit stderr
  // HOST:PORT of /metrics and /sd; launched tasks then serve theirs on their
  // own host. Empty: none.
  std::string metrics_listen;
};

// Owns everything the coordinator runs. Start() once, Shutdown() once (also
// run by the destructor). Not thread-safe itself; its parts are.
class CoordinatorServer {
 public:
  // Loads the state dir and validates the config; starts nothing.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Create(
      CoordinatorConfig config);
  ~CoordinatorServer();

  absl::Status Start();
  // Stops the children (SIGTERM, then SIGKILL) and the server.
  void Shutdown();

  std::string address() const { return server_->DialAddress(); }
  // Whether its gRPC server answers within `timeout` (the systemd watchdog).
  bool Answers(absl::Duration timeout) {
    return server_->AnswersHealthCheck(timeout);
  }
  ClusterManager& manager() { return *manager_; }

 private:
  CoordinatorConfig config_;
  // Held while this coordinator owns the state dir: a second one on it is
  // refused. Declared first, so released last.
  std::optional<FileLock> state_lock_;
  std::optional<StateStore> store_;
  PersistedState state_;
  std::unique_ptr<ClusterManager> manager_;
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<rpc::Authenticator> auth_;
  std::unique_ptr<CoordinatorService> coordinator_service_;
  std::unique_ptr<PsStatusReader> ps_reader_;
  // Drives the streaming calls (WatchJob, StreamLogs); declared before the
  // services, so destroyed after them and after the server.
  std::unique_ptr<rpc::StreamPump> pump_;
  // Slow work of the handlers (library uploads and fetches). Declared
  // before the services, so destroyed after them.
  std::unique_ptr<Executor> slow_;
  std::unique_ptr<Executor> fan_out_;  // calls that wait on other hosts
  std::unique_ptr<AdminService> admin_service_;
  std::unique_ptr<StoreManager> store_manager_;
  std::unique_ptr<StoreService> store_service_;
  std::unique_ptr<LibraryStore> libraries_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<JobsService> jobs_service_;
  std::unique_ptr<JobControlService> job_control_service_;
  std::unique_ptr<JobLoop> job_loop_;
  std::unique_ptr<rpc::RpcServer> server_;
  // After everything they read, so that they stop first.
  std::unique_ptr<rpc::MetricsHttpServer> metrics_;
  ScopedCollector cluster_metrics_;
  // Without a state dir: where libraries and checkpoints went, removed on
  // shutdown.
  std::string scratch_dir_;
  bool started_ = false;
  // The last save of the state failed (the monitor thread and Shutdown).
  std::atomic<bool> persist_failing_{false};

  CoordinatorServer() = default;
  std::vector<LaunchPlan> PlanLaunches() const;
  void AddServices(rpc::RpcServer& server);
  // Saves the task table and pids; false when the save failed (logged once
  // per run of failures).
  bool PersistState();
  absl::Status StartMetrics();
};

}  // namespace cohort::coordinator
