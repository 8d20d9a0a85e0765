#include "coordinator/placement.h"

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort::coordinator {
namespace {

absl::Status Unplaceable(absl::string_view why) {
  return absl::FailedPreconditionError(why);
}

// "chief:0 and worker:0 share GPU-...": the first GPU that two of the
// agents' first `devices` devices are, by UUID; "" when none is shared.
std::string SharedGpu(const std::vector<const AgentView*>& agents,
                      int devices) {
  std::map<std::string, const AgentView*> owner;
  for (const AgentView* view : agents) {
    const int n = std::min<int>(devices, view->gpu_uuids.size());
    for (int d = 0; d < n; ++d) {
      const std::string& uuid = view->gpu_uuids[d];
      if (uuid.empty()) continue;
      auto [it, fresh] = owner.emplace(uuid, view);
      if (!fresh && it->second != view) {
        return absl::StrCat(it->second->task.ToString(), " and ",
                            view->task.ToString(), " share ", uuid);
      }
    }
  }
  return "";
}

// The AUTO choice, or a check of the requested one, given whether every
// replica is on a CUDA device, every agent has NCCL, and which GPU two
// agents share (NCCL takes one rank per GPU). Choices other than NCCL
// reduce in host memory; on CUDA devices each collective is staged through
// it.
absl::StatusOr<SyncPlacement> ChooseCommunication(
    const v1::JobSpec& spec, bool cuda, bool nccl, int num_agents,
    const std::string& shared_gpu) {
  SyncPlacement out;
  out.communication = spec.communication();
  // Within every ring the size decides too: up to 32 KiB a buffer goes to
  // every peer at once (one message latency), above it around the ring.
  constexpr char kBySize[] =
      "; buffers up to 32 KiB go to every peer at once, larger ones around "
      "a ring";
  const std::string across =
      num_agents == 1
          ? ""
          : absl::StrCat(", then over a ring of the ", num_agents, " agents");
  switch (spec.communication()) {
    case v1::COMMUNICATION_AUTO:
      if (cuda && nccl && shared_gpu.empty()) {
        out.communication = v1::COMMUNICATION_NCCL;
        out.note = "AUTO picked NCCL: every replica is on a CUDA device";
      } else if (cuda && nccl) {
        out.communication = v1::COMMUNICATION_HIERARCHICAL;
        out.note = absl::StrCat(
            "AUTO picked hierarchical copy through host memory: ", shared_gpu,
            ", and NCCL takes one rank per GPU; replicas reduce between "
            "threads inside each agent",
            across, kBySize);
      } else if (cuda) {
        out.communication = v1::COMMUNICATION_HIERARCHICAL;
        out.note = absl::StrCat(
            "AUTO picked hierarchical copy through host memory: the "
            "replicas are on CUDA devices and the agents have no NCCL; "
            "replicas reduce between threads inside each agent",
            across, kBySize);
      } else {
        out.communication = v1::COMMUNICATION_HIERARCHICAL;
        out.note = absl::StrCat(
            "AUTO picked hierarchical: CPU replicas reduce between threads "
            "inside each agent",
            across, kBySize);
      }
      return out;
    case v1::COMMUNICATION_NCCL:
      if (!cuda || !nccl) {
        return Unplaceable(
            cuda ? "communication NCCL: the agents were built without NCCL"
                 : "communication NCCL needs CUDA devices, and the agents "
                   "offer CPU devices; use AUTO, RING, HIERARCHICAL or "
                   "REDUCTION_TO_ONE_DEVICE");
      }
      if (!shared_gpu.empty()) {
        return Unplaceable(absl::StrCat(
            "communication NCCL: ", shared_gpu,
            ", and NCCL takes one rank per GPU; use AUTO, HIERARCHICAL, "
            "REDUCTION_TO_ONE_DEVICE or RING, which stage through host "
            "memory, or give each agent its own GPU (CUDA_VISIBLE_DEVICES)"));
      }
      out.note = "NCCL, as requested";
      return out;
    case v1::COMMUNICATION_RING:
      out.note = "RING, as requested: one gRPC ring over every replica";
      break;
    case v1::COMMUNICATION_HIERARCHICAL:
      out.note = absl::StrCat(
          "HIERARCHICAL, as requested: a ring of copies inside each agent",
          across);
      break;
    case v1::COMMUNICATION_REDUCTION_TO_ONE_DEVICE:
      out.note = absl::StrCat(
          "REDUCTION_TO_ONE_DEVICE, as requested: each agent's replicas "
          "reduce to its first one",
          across, ", which hands the result back");
      break;
    default:
      return Unplaceable(
          absl::StrCat("unknown communication ", spec.communication()));
  }
  if (cuda) absl::StrAppend(&out.note, " (staged through host memory)");
  return out;
}

// Replicas per agent: devices_per_agent, or every device when it is 0.
absl::StatusOr<int> LocalReplicas(const v1::JobSpec& spec,
                                  const std::vector<const AgentView*>& agents) {
  int local = spec.devices_per_agent();
  if (spec.strategy() == v1::ONE_DEVICE) {
    if (local > 1) {
      return Unplaceable(absl::StrCat(
          "OneDevice runs one replica; devices_per_agent=", local));
    }
    local = 1;
  }
  const AgentView& first = *agents[0];
  for (const AgentView* view : agents) {
    if (local == 0 && view->num_devices != first.num_devices) {
      return Unplaceable(absl::StrCat(
          "agents have different device counts (", first.task.ToString(), ": ",
          first.num_devices, ", ", view->task.ToString(), ": ",
          view->num_devices,
          "); set devices_per_agent to use the same number on each"));
    }
    if (local > view->num_devices) {
      return Unplaceable(absl::StrCat("devices_per_agent=", local, " but ",
                                      view->task.ToString(), " has ",
                                      view->num_devices, " device(s)"));
    }
  }
  if (local == 0) local = first.num_devices;
  if (local <= 0) {
    return Unplaceable(
        absl::StrCat(first.task.ToString(), " reports no devices"));
  }
  return local;
}

}  // namespace

std::vector<TaskId> JobTasks(const ClusterSpec& cluster,
                             const v1::JobSpec& spec) {
  std::vector<TaskId> tasks;
  for (const TaskId& task : cluster.tasks()) {
    if (task.type == kChief || task.type == kWorker) tasks.push_back(task);
  }
  // The single-agent strategies would leave all but one agent idle.
  if (spec.strategy() != v1::MULTI_WORKER_MIRRORED &&
      spec.strategy() != v1::PARAMETER_SERVER && tasks.size() > 1) {
    tasks.resize(1);
  }
  return tasks;
}

std::vector<TaskId> PsTasks(const ClusterSpec& cluster) {
  std::vector<TaskId> tasks;
  for (const TaskId& task : cluster.tasks()) {
    if (task.type == kPs) tasks.push_back(task);
  }
  return tasks;
}

const AgentView* FindView(const std::vector<AgentView>& agents,
                          const TaskId& task) {
  auto it = std::find_if(agents.begin(), agents.end(),
                         [&](const AgentView& a) { return a.task == task; });
  return it == agents.end() ? nullptr : &*it;
}

std::string DescribeTask(const TaskId& task, const AgentView* view) {
  std::string why =
      view == nullptr ? "unknown" : v1::TaskState_Name(view->state);
  if (view != nullptr && !view->last_error.empty()) {
    absl::StrAppend(&why, ": ", view->last_error);
  } else if (view != nullptr && view->state == v1::STARTING) {
    absl::StrAppend(&why, ": not registered yet");
  }
  return absl::StrCat(task.ToString(), " (", why, ")");
}

Readiness CheckReady(const std::vector<TaskId>& tasks,
                     const std::vector<AgentView>& agents) {
  Readiness out;
  for (const TaskId& task : tasks) {
    const AgentView* view = FindView(agents, task);
    if (view != nullptr && view->state == v1::READY) {
      out.ready.push_back(view);
    } else {
      out.not_ready.push_back(DescribeTask(task, view));
    }
  }
  return out;
}

absl::Status CheckSyncShape(const v1::JobSpec& spec, int num_agents) {
  const int per_agent = spec.devices_per_agent();
  const int logical = std::max(1, spec.logical_devices_per_replica());
  if (spec.strategy() == v1::ONE_DEVICE && per_agent > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "devices_per_agent=", per_agent,
        ": OneDevice runs one replica (use logical_devices_per_replica for "
        "a replica over several devices)"));
  }
  if (logical > 1 && spec.communication() == v1::COMMUNICATION_NCCL) {
    return absl::InvalidArgumentError(
        "communication NCCL reduces on one device per replica, and "
        "logical_devices_per_replica > 1 gives each several; use AUTO, "
        "HIERARCHICAL, REDUCTION_TO_ONE_DEVICE or RING");
  }
  // The replicas are a multiple of the agents; of more when the devices
  // each takes are set.
  int local = 1;
  if (spec.strategy() != v1::ONE_DEVICE && per_agent > 0 &&
      per_agent % logical == 0) {
    local = per_agent / logical;
  }
  const int64_t replicas = int64_t{num_agents} * local;
  if (replicas > 0 && spec.global_batch_size() % replicas != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global_batch_size ", spec.global_batch_size(),
        " is not divisible by the job's ", replicas, " replicas (", num_agents,
        " agent(s)", local > 1 ? absl::StrCat(" x ", local, " per agent") : "",
        "); use a multiple of ", replicas));
  }
  return absl::OkStatus();
}

absl::StatusOr<SyncPlacement> PlaceSync(
    const v1::JobSpec& spec, const std::vector<const AgentView*>& agents) {
  if (agents.empty()) {
    return Unplaceable("the cluster has no chief or worker task to run on");
  }
  absl::StatusOr<int> local = LocalReplicas(spec, agents);
  if (!local.ok()) return local.status();
  const int logical = std::max(1, spec.logical_devices_per_replica());
  if (logical > 1) {
    // OneDevice's one replica takes as many devices as it has logical ones.
    const int devices = spec.strategy() == v1::ONE_DEVICE ? logical : *local;
    for (const AgentView* view : agents) {
      if (view->num_devices < logical) {
        return Unplaceable(absl::StrCat("a replica needs ", logical,
                                        " devices (logical_devices_per_"
                                        "replica) and ",
                                        view->task.ToString(), " has ",
                                        view->num_devices));
      }
    }
    if (devices % logical != 0) {
      return Unplaceable(absl::StrCat(
          devices, " devices per agent do not divide into replicas of ",
          logical,
          " logical devices; set devices_per_agent to a multiple "
          "of ",
          logical));
    }
    *local = devices / logical;
  }
  const int num_agents = static_cast<int>(agents.size());
  const int replicas = num_agents * *local;
  if (spec.global_batch_size() % replicas != 0) {
    return Unplaceable(absl::StrCat(
        "global batch size ", spec.global_batch_size(),
        " is not divisible by the ", replicas, " replicas (", num_agents,
        " agent(s) x ", *local, " device(s)); use a multiple of ", replicas));
  }
  auto is_cuda = [](const AgentView* v) { return v->cuda; };
  const bool cuda = std::all_of(agents.begin(), agents.end(), is_cuda);
  if (!cuda && std::any_of(agents.begin(), agents.end(), is_cuda)) {
    return Unplaceable(
        "some of the job's agents have CUDA devices and some CPU devices; a "
        "job's replicas must all be on one kind (set CUDA_VISIBLE_DEVICES= "
        "on the GPU agents to run on CPUs)");
  }
  // NCCL reduces each replica's tensors on the one device of its
  // communicator; tensors on other logical devices go through host memory.
  const bool nccl =
      logical == 1 && std::all_of(agents.begin(), agents.end(),
                                  [](const AgentView* v) { return v->nccl; });
  if (logical > 1 && spec.communication() == v1::COMMUNICATION_NCCL) {
    return Unplaceable(
        "communication NCCL reduces on one device per replica, and these "
        "replicas have several logical devices; use AUTO, HIERARCHICAL, "
        "REDUCTION_TO_ONE_DEVICE or RING, which stage through host memory");
  }
  absl::StatusOr<SyncPlacement> placement = ChooseCommunication(
      spec, cuda, nccl, num_agents,
      cuda ? SharedGpu(agents, *local * logical) : "");
  if (!placement.ok()) return placement.status();
  placement->local_replicas = *local;
  placement->logical_devices = logical;
  placement->num_replicas = replicas;
  return placement;
}

std::string DescribeLogicalDevices(const AgentView& agent, int replicas,
                                   int logical) {
  if (logical <= 1) return "";
  const char* kind = agent.cuda ? "cuda:" : "cpu:";
  std::vector<std::string> parts;
  for (int r = 0; r < replicas; ++r) {
    std::vector<std::string> devices;
    for (int d = r * logical; d < (r + 1) * logical; ++d) {
      devices.push_back(absl::StrCat(kind, d));
    }
    parts.push_back(
        absl::StrCat("replica ", r, " on ", absl::StrJoin(devices, "+")));
  }
  return absl::StrCat(": ", absl::StrJoin(parts, ", "));
}

absl::StatusOr<int> PlacePsExecutors(
    const v1::JobSpec& spec, const std::vector<const AgentView*>& workers) {
  for (const AgentView* view : workers) {
    if (view->num_devices <= 0) {
      return Unplaceable(absl::StrCat("worker agent ", view->task.ToString(),
                                      " reports no devices"));
    }
  }
  return std::max(1, spec.ps().max_inflight());
}

}  // namespace cohort::coordinator
