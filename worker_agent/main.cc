// cohort-agent: one per worker or chief task. Discovers its devices,
// registers with the coordinator and heartbeats; runs the job replicas.

#include "absl/flags/flag.h"
#include "common/flags.h"
#include "rpc/task_runtime.h"
#include "spdlog/spdlog.h"
#include "worker_agent/agent_service.h"
#include "worker_agent/device_discovery.h"

ABSL_FLAG(int, cpu_devices, 1,
          "CPU devices to offer when there is no CUDA GPU.");

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
  rpc::TaskConfig config = rpc::InitTaskDaemon(
      argc, argv, "agent", kUsage, {std::string(kWorker), std::string(kChief)});
  const int cpu_devices = absl::GetFlag(FLAGS_cpu_devices);
  if (cpu_devices < 1) {
    ExitWithConfigError(
        absl::InvalidArgumentError("--cpu_devices must be at least 1"));
  }
  agent::DiscoveredDevices devices = agent::DiscoverDevices(cpu_devices);
  spdlog::info("devices: {}", devices.note);

  rpc::TaskRuntime runtime("agent", std::move(config));
  agent::AgentService service(&runtime, std::move(devices.devices));
  return runtime.Run({&service}, [&service] { return service.Report(); });
}
