// cohort-agent: one per worker, chief or evaluator task. Discovers its
// devices, registers with the coordinator and heartbeats; runs the job
// replicas, or, as the evaluator, evaluates the job's checkpoints.

#include <memory>

#include "absl/flags/flag.h"
#include "common/cluster_spec.h"
#include "common/flags.h"
#include "task/task_runtime.h"
#include "worker_agent/agent_server.h"

ABSL_FLAG(int, cpu_devices, 1,
          "CPU devices to offer when there is no CUDA GPU.");
ABSL_FLAG(std::string, state_dir, "",
          "This agent's local state: fetched step libraries and its own copy "
          "of each job's checkpoints, so that a job survives the loss of any "
          "one host without a shared filesystem. Default: "
          "$TMPDIR/cohort-agent-<uid>/<type>-<index>.");
ABSL_FLAG(absl::Duration, stop_timeout, absl::Minutes(2),
          "How long a job attempt that was ended (cancelled, replaced, or "
          "stopped with the agent) may take to stop. Past it, the job's own "
          "code has not returned from a call (init, step, dataset, stream), "
          "which nothing can interrupt: the agent exits with code 3, so that "
          "its supervisor restarts it clean.");
ABSL_FLAG(absl::Duration, shutdown_checkpoint_timeout, absl::Seconds(10),
          "On SIGTERM or SIGINT, how long a running synchronous job may take "
          "to checkpoint the step under way on every replica and end its "
          "attempt, so that the next attempt (on a replacement, or once this "
          "agent is back) loses no steps. Past it, or with 0, the attempt "
          "stops without that checkpoint. Keep it under the supervisor's "
          "stop timeout (systemd's TimeoutStopSec, Kubernetes' "
          "terminationGracePeriodSeconds).");
ABSL_FLAG(std::string, peer_ports, "",
          "Ports the agent's peer servers may bind, FIRST-LAST (e.g. "
          "20000-20099), so that a firewall between hosts can let the data "
          "plane through: a running job holds one per replica under RING, "
          "one per agent under HIERARCHICAL. (NCCL, between CUDA replicas, "
          "picks its own.) Default: any free port.");
ABSL_FLAG(std::string, peer_host, "",
          "The address of this host that its peer servers bind and peers "
          "dial, to keep the data plane between hosts on a network of its "
          "own, as GLOO_SOCKET_IFNAME does for Gloo. NCCL, between CUDA "
          "replicas, is pointed at its interface too (NCCL takes an "
          "interface's first address), unless NCCL_SOCKET_IFNAME is set. "
          "Default: the host of --listen.");
ABSL_FLAG(std::string, cache_dir, "",
          "Where fetched step libraries are kept. Default: "
          "<state_dir>/libraries.");

namespace {

constexpr char kUsage[] =
    "a Cohort worker agent (one per chief, worker or evaluator task).\n"
    "\n"
    "  cohort-agent --task=worker:0 --listen=10.0.0.2:2222 "
    "--coordinator=10.0.0.1:7070\n"
    "\n"
    "Exit codes: 0 stopped by a signal, 1 runtime failure, 2 bad "
    "configuration or refused by the coordinator, 3 a job's own code did "
    "not return within --stop_timeout of the job being ended.";

}  // namespace

int main(int argc, char** argv) {
  using namespace cohort;
  task::TaskConfig config = task::InitTaskDaemon(
      argc, argv, "agent", kUsage,
      {std::string(kWorker), std::string(kChief), std::string(kEvaluator)});
  absl::StatusOr<std::unique_ptr<agent::AgentServer>> server =
      agent::AgentServer::Create(
          std::move(config),
          {.cpu_devices = absl::GetFlag(FLAGS_cpu_devices),
           .state_dir = absl::GetFlag(FLAGS_state_dir),
           .cache_dir = absl::GetFlag(FLAGS_cache_dir),
           .stop_timeout = absl::GetFlag(FLAGS_stop_timeout),
           .leave_timeout = absl::GetFlag(FLAGS_shutdown_checkpoint_timeout),
           .peer_ports = absl::GetFlag(FLAGS_peer_ports),
           .peer_host = absl::GetFlag(FLAGS_peer_host)});
  if (!server.ok()) ExitWithConfigError(server.status());
  return (*server)->Run();
}
