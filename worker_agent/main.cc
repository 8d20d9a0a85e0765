// cohort-agent: one per worker or chief task. Discovers its devices,
// registers with the coordinator and heartbeats; runs the job replicas.

#include <unistd.h>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/cluster_spec.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/host_info.h"
#include "task/task_runtime.h"
#include "spdlog/spdlog.h"
#include "worker_agent/agent_service.h"
#include "worker_agent/device_discovery.h"
#include "worker_agent/job_agent.h"

ABSL_FLAG(int, cpu_devices, 1,
          "CPU devices to offer when there is no CUDA GPU.");
ABSL_FLAG(std::string, state_dir, "",
          "This agent's local state: fetched step libraries and its own copy "
          "of each job's checkpoints, so that a job survives the loss of any "
          "one host without a shared filesystem. Default: "
          "$TMPDIR/cohort-agent-<uid>/<task>.");
ABSL_FLAG(std::string, cache_dir, "",
          "Where fetched step libraries are kept. Default: "
          "<state_dir>/libraries.");

namespace {

constexpr char kUsage[] =
    "a Cohort worker agent (one per chief or worker task).\n"
    "\n"
    "  cohort-agent --task=worker:0 --listen=10.0.0.2:2222 "
    "--coordinator=10.0.0.1:7070\n"
    "\n"
    "Exit codes: 0 stopped by a signal, 1 runtime failure, 2 bad "
    "configuration or refused by the coordinator.";

}  // namespace

int main(int argc, char** argv) {
  using namespace cohort;
  task::TaskConfig config = task::InitTaskDaemon(
      argc, argv, "agent", kUsage, {std::string(kWorker), std::string(kChief)});
  const int cpu_devices = absl::GetFlag(FLAGS_cpu_devices);
  if (cpu_devices < 1) {
    ExitWithConfigError(
        absl::InvalidArgumentError("--cpu_devices must be at least 1"));
  }
  agent::DiscoveredDevices devices = agent::DiscoverDevices(cpu_devices);
  spdlog::info("devices: {}", devices.note);

  agent::JobAgentOptions jobs{.task = config.task,
                              .coordinator = config.coordinator,
                              .security = config.daemon.server.security};
  for (const v1::Device& device : devices.devices) {
    jobs.devices.push_back({.kind = device.kind() == v1::Device::CUDA
                                        ? Device::Kind::kCuda
                                        : Device::Kind::kCpu,
                            .index = device.index()});
  }
  // Peer servers of the job's collectives bind where the agent serves.
  const absl::StatusOr<HostPort> listen =
      ParseHostPort(config.daemon.server.listen, /*allow_port_zero=*/true);
  jobs.peer_listen_host = !listen.ok() ? "127.0.0.1"
                          : listen->host.find(':') != std::string::npos
                              ? absl::StrCat("[", listen->host, "]")
                              : listen->host;
  std::string state_dir = absl::GetFlag(FLAGS_state_dir);
  if (state_dir.empty()) {
    state_dir = absl::StrCat(TempDirectory(), "/cohort-agent-", getuid(), "/",
                             config.task.type, "-", config.task.index);
  }
  jobs.cache_dir = absl::GetFlag(FLAGS_cache_dir);
  if (jobs.cache_dir.empty()) jobs.cache_dir = state_dir + "/libraries";
  jobs.checkpoint_copies = state_dir + "/checkpoints";
  jobs.origin = absl::StrCat(config.task.ToString(), " on ", Hostname());

  task::TaskRuntime runtime("agent", std::move(config));
  agent::AgentService service(&runtime, std::move(devices.devices));
  agent::JobAgent job_agent(std::move(jobs));
  job_agent.Start();
  const int code =
      runtime.Run({&service}, [&service] { return service.Report(); });
  job_agent.Shutdown();
  return code;
}
