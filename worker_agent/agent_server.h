#pragma once

// A worker or chief task's daemon, put together: its devices, the Agent
// service, and the job agent that runs the coordinator's assignments,
// served by the task runtime (register, heartbeat, signals). main.cc only
// turns flags into AgentServerOptions.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/v1/cluster.pb.h"
#include "task/task_runtime.h"
#include "worker_agent/job_agent.h"

namespace cohort::agent {

struct AgentServerOptions {
  int cpu_devices = 1;  // offered when there is no CUDA GPU
  // Local state: fetched libraries and this agent's checkpoint copies.
  // Empty: $TMPDIR/cohort-agent-<uid>/<type>-<index>.
  std::string state_dir;
  std::string cache_dir;  // empty: <state_dir>/libraries
  absl::Duration stop_timeout = absl::Minutes(2);  // JobAgentOptions'
  // On SIGTERM/SIGINT, how long a running job may take to checkpoint the
  // step under way and end (JobAgentOptions::leave_timeout); 0: no
  // checkpoint.
  absl::Duration leave_timeout = absl::Seconds(10);
  // The ports the agent's peer servers (one per replica of a running job
  // under RING, one per agent under HIERARCHICAL) may bind, as
  // "FIRST-LAST". Empty: any free port.
  std::string peer_ports;
  // The address the agent's peer servers bind and peers dial: a network of
  // its own for the data plane. Empty: the host of the agent's --listen.
  std::string peer_host;
};

// Owns the service, the job agent and the runtime. Create and Run from one
// thread.
class AgentServer {
 public:
  // Checks `options` and discovers the devices. INVALID_ARGUMENT naming
  // the option (by its flag).
  static absl::StatusOr<std::unique_ptr<AgentServer>> Create(
      task::TaskConfig config, AgentServerOptions options);

  // Runs jobs and serves until SIGTERM/SIGINT or until the coordinator
  // refuses the task; returns the exit code (TaskRuntime::Run).
  int Run();

  const std::vector<v1::Device>& devices() const { return devices_; }
  const JobAgentOptions& job_options() const { return jobs_; }

 private:
  AgentServer(task::TaskConfig config, std::vector<v1::Device> devices,
              JobAgentOptions jobs);

  const std::vector<v1::Device> devices_;
  const JobAgentOptions jobs_;
  task::TaskRuntime runtime_;
};

}  // namespace cohort::agent
