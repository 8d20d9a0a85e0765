#pragma once

// Where a job runs: pure functions of the job spec, the cluster spec and
// the tasks' views. They pick each agent's replica count and, for AUTO,
// the collective implementation, or say why the job cannot run. No state,
// no clock; thread-compatible.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/v1/cluster.pb.h"
#include "cohort/v1/job.pb.h"
#include "common/cluster_spec.h"

namespace cohort::coordinator {

// What placement needs to know about one task (agents, and the ps tasks of
// ParameterServer jobs).
struct AgentView {
  TaskId task;
  v1::TaskState state = v1::STARTING;
  int num_devices = 0;
  bool cuda = false;  // its devices are CUDA GPUs
  bool nccl = false;  // it was built with NCCL
  // Each device's GPU UUID, in device order ("" for CPU devices): NCCL
  // takes one rank per GPU, so agents that share one must not use it.
  std::vector<std::string> gpu_uuids;
  std::string last_error;  // why it last died
};

// How last_error begins when the task deregistered itself (it was stopped,
// by SIGTERM or its orphan timeout), rather than being lost.
inline constexpr char kDeregisteredError[] = "deregistered: ";

// The agents a job runs on, in rank order: every chief and worker for
// MultiWorkerMirrored and ParameterServer, the first of them otherwise.
std::vector<TaskId> JobTasks(const ClusterSpec& cluster,
                             const v1::JobSpec& spec);
// The cluster's ps tasks, in index order.
std::vector<TaskId> PsTasks(const ClusterSpec& cluster);

// The view of `task` among `agents`; nullptr when there is none.
const AgentView* FindView(const std::vector<AgentView>& agents,
                          const TaskId& task);
// "worker:1 (DEAD: its error)": a task that is not READY, for messages.
std::string DescribeTask(const TaskId& task, const AgentView* view);

// The views of `tasks`, in their order, split by readiness.
struct Readiness {
  std::vector<const AgentView*> ready;
  std::vector<std::string> not_ready;  // DescribeTask of each
};
Readiness CheckReady(const std::vector<TaskId>& tasks,
                     const std::vector<AgentView>& agents);

// A synchronous job's shape on its agents.
struct SyncPlacement {
  int local_replicas = 0;   // on each agent
  int logical_devices = 1;  // devices per replica
  int num_replicas = 0;
  v1::Communication communication = v1::COMMUNICATION_AUTO;  // never AUTO
  std::string note;  // what was chosen and why, for people
};

// What PlaceSync would refuse of a synchronous job on `num_agents` agents
// whatever devices they report: checked at submission, so that a queued
// job does not fail only when its turn comes. INVALID_ARGUMENT naming the
// field.
absl::Status CheckSyncShape(const v1::JobSpec& spec, int num_agents);

// Places a synchronous job on `agents` (all READY, in rank order).
// FAILED_PRECONDITION saying what does not fit: device counts, batch
// divisibility, mixed CPU and CUDA agents, a communication the agents
// cannot do.
absl::StatusOr<SyncPlacement> PlaceSync(
    const v1::JobSpec& spec, const std::vector<const AgentView*>& agents);

// ": replica 0 on cpu:0+cpu:1, replica 1 on cpu:2+cpu:3" for `replicas`
// replicas of `logical` devices each on `agent`; "" when each has one.
std::string DescribeLogicalDevices(const AgentView& agent, int replicas,
                                   int logical);

// A ParameterServer job's closure executors per worker agent (all READY).
// FAILED_PRECONDITION when a worker has no devices.
absl::StatusOr<int> PlacePsExecutors(
    const v1::JobSpec& spec, const std::vector<const AgentView*>& workers);

}  // namespace cohort::coordinator
