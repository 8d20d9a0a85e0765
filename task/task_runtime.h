#pragma once

// What the task daemons (cohort-agent, cohort-ps) share: their identity, the
// gRPC server, the session with the coordinator, readiness reporting and
// signal handling.

#include <grpcpp/impl/codegen/service_type.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/v1/cluster.pb.h"
#include "common/cluster_spec.h"
#include "rpc/auth.h"
#include "rpc/server_flags.h"

namespace cohort::task {

struct TaskConfig {
  TaskId task;
  std::string coordinator;        // HOST:PORT
  std::string advertise_address;  // empty: the --listen address as bound
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // Exit when the coordinator has not answered for this long.
  absl::Duration orphan_timeout = absl::InfiniteDuration();
  rpc::DaemonFlags daemon;
  // The listen address is TF_CONFIG's for this task (no --listen).
  bool listen_from_tf_config = false;
  // Likely mistakes that a working setup may also make, logged at startup.
  std::vector<std::string> warnings;
};

// Reads --task, --coordinator, --advertise_address, --heartbeat_interval and
// the daemon flags. Identity and listen address fall back to TF_CONFIG's
// `task` and its address, as TensorFlow does. `allowed_types` is what this
// daemon may be (e.g. {"worker", "chief"}). Errors name the flag.
absl::StatusOr<TaskConfig> TaskConfigFromFlags(
    const std::vector<std::string>& allowed_types);

// The start of a task daemon's main(): blocks termination signals, parses
// the flags, reads the config and sets up logging as "<daemon> <task>".
// Exits with code 2 and one line on any configuration error.
TaskConfig InitTaskDaemon(int argc, char** argv, absl::string_view daemon,
                          absl::string_view usage,
                          const std::vector<std::string>& allowed_types);

// Owns the task's server and session while Run() runs. The accessors are
// thread-safe.
class TaskRuntime {
 public:
  TaskRuntime(std::string daemon_name, TaskConfig config);

  const TaskConfig& config() const { return config_; }
  const rpc::Authenticator* auth() const { return &auth_; }
  bool registered() const { return registered_.load(); }

  // The common part of the task's report (identity, address, pid, host,
  // version, start time); daemons add their own fields.
  v1::TaskReport BaseReport() const;

  // Serves `services` (not owned), registers, and heartbeats with
  // `report()` until SIGTERM/SIGINT (exit code 0) or until the coordinator
  // refuses this task (exit code 2). Exit code 1 when it cannot serve.
  // After a signal, `on_signal` (when set) runs before the task leaves the
  // coordinator, still serving and heartbeating: the agent checkpoints its
  // job there.
  int Run(const std::vector<grpc::Service*>& services,
          std::function<v1::TaskReport()> report,
          std::function<void()> on_signal = nullptr);

 private:
  const std::string daemon_name_;
  const TaskConfig config_;
  const rpc::Authenticator auth_;
  const absl::Time started_;
  std::atomic<bool> registered_{false};
  // Set once each in Run(), while the server already answers status calls
  // that read them.
  mutable absl::Mutex mu_;
  std::string address_ ABSL_GUARDED_BY(mu_);
  std::string metrics_address_ ABSL_GUARDED_BY(mu_);  // empty: no endpoint
};

}  // namespace cohort::task
