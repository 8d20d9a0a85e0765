// cohort-coordinator: reads the cluster spec, launches and supervises the
// local tasks, tracks heartbeats and serves the Admin API.

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/cluster_spec.h"
#include "common/exit_codes.h"
#include "common/flags.h"
#include "common/logging.h"
#include "common/signals.h"
#include "common/status_macros.h"
#include "common/systemd_notify.h"
#include "coordinator/coordinator_server.h"
#include "rpc/security.h"
#include "rpc/server_flags.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(
    std::string, cluster_spec, "",
    "TF_CONFIG-style JSON file. Default: the TF_CONFIG variable, else the "
    "spec saved in --state_dir.");
ABSL_FLAG(std::string, state_dir, "",
          "Directory for the coordinator's state, so that a restarted "
          "coordinator knows the cluster again. Empty: keep no state.");
ABSL_FLAG(std::string, launch, "local",
          "local: launch an agent per chief, worker and evaluator task, and a "
          "PS per ps task, whose host is this machine. none: launch nothing; "
          "tasks register.");
ABSL_FLAG(absl::Duration, heartbeat_timeout, absl::Seconds(5),
          "A task silent this long is marked DEAD.");
ABSL_FLAG(absl::Duration, startup_timeout, absl::Seconds(30),
          "A launched task that has not registered after this is DEAD.");
ABSL_FLAG(bool, restart, true, "Restart launched tasks that die.");
ABSL_FLAG(absl::Duration, restart_backoff, absl::Seconds(1),
          "Delay before the first restart; doubles per consecutive failure.");
ABSL_FLAG(absl::Duration, restart_backoff_max, absl::Seconds(30),
          "Upper bound of the restart delay.");
ABSL_FLAG(std::string, agent_binary, "",
          "cohort-agent to launch. Default: the one beside this binary. A "
          "wrapper script must exec it: the task is the process that "
          "registers.");
ABSL_FLAG(std::string, ps_binary, "",
          "cohort-ps to launch. Default: the one beside this binary (a "
          "wrapper must exec it, as for --agent_binary).");
ABSL_FLAG(int, cpu_devices, 1, "--cpu_devices for launched agents.");
ABSL_FLAG(absl::Duration, agent_stop_timeout, absl::Minutes(2),
          "--stop_timeout for launched agents: how long a job's code may "
          "take to return once the job's attempt is ended, before the agent "
          "exits (code 3) and is restarted.");
ABSL_FLAG(absl::Duration, task_stop_grace, cohort::kDefaultStopGrace,
          "On shutdown, how long launched tasks have between SIGTERM and "
          "SIGKILL. Launched agents spend up to two thirds of it "
          "checkpointing a running job (their --shutdown_checkpoint_timeout).");
ABSL_FLAG(absl::Duration, task_orphan_timeout, absl::Seconds(60),
          "Launched tasks exit when this coordinator has not answered them "
          "for this long, so that none outlives it for good; a coordinator "
          "restarted within it adopts them. 0: never.");
ABSL_FLAG(absl::Duration, placement_timeout, absl::Minutes(2),
          "How long a job's attempt waits for its tasks to be READY (at the "
          "start, and after a restart while a lost host or its replacement "
          "comes back) before it fails naming them; a ParameterServer "
          "attempt with its ps tasks and a worker READY starts without the "
          "other workers instead. A job's placement_timeout overrides it.");
ABSL_FLAG(int, finished_jobs_kept, 1000,
          "How many ended jobs the job table keeps, the newest; older ones "
          "are dropped from it (their checkpoints stay).");
ABSL_FLAG(bool, new_cluster, false,
          "Start a new cluster in --state_dir instead of resuming the one "
          "kept there: stop the tasks it left running and move its state to "
          "<state_dir>/previous. Refused while its coordinator still serves.");
ABSL_FLAG(std::string, task_log_dir, "",
          "Where launched tasks write their logs. Default: <state_dir>/logs, "
          "or this process's stderr without a state dir.");

namespace cohort::coordinator {
namespace {

constexpr char kUsage[] =
    "runs a Cohort cluster from a TF_CONFIG-style spec.\n"
    "\n"
    "  cohort-coordinator --cluster_spec=cluster.json --listen=0.0.0.0:7070\n"
    "  TF_CONFIG='{\"cluster\":{...}}' cohort-coordinator --launch=none\n"
    "\n"
    "Exit codes: 0 stopped by a signal, 1 runtime failure, 2 bad "
    "configuration.";

absl::StatusOr<CoordinatorConfig> ConfigFromFlags() {
  CoordinatorConfig config;
  COHORT_ASSIGN_OR_RETURN(rpc::DaemonFlags flags,
                          rpc::DaemonFlagsFromFlags("127.0.0.1:7070"));
  config.server = std::move(flags.server);
  config.listen_given = rpc::ListenFlagGiven();
  config.security_files = flags.security_files;
  config.log_level = flags.log_level;
  config.metrics_listen = flags.metrics_listen;

  const std::string spec_file = absl::GetFlag(FLAGS_cluster_spec);
  if (!spec_file.empty()) {
    COHORT_ASSIGN_OR_RETURN(config.spec, ClusterSpec::FromFile(spec_file));
  } else {
    absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromEnvironment();
    if (spec.ok()) {
      config.spec = *std::move(spec);
    } else if (spec.status().code() != absl::StatusCode::kNotFound) {
      return spec.status();
    }
  }
  config.state_dir = absl::GetFlag(FLAGS_state_dir);
  const std::string launch = absl::GetFlag(FLAGS_launch);
  if (launch == "local") {
    config.launch = LaunchMode::kLocal;
  } else if (launch == "none") {
    config.launch = LaunchMode::kNone;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--launch: unknown mode \"", launch, "\" (expected local or none)"));
  }
  config.cluster.heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
  config.cluster.startup_timeout = absl::GetFlag(FLAGS_startup_timeout);
  if (config.cluster.heartbeat_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--heartbeat_timeout must be positive");
  }
  if (config.cluster.startup_timeout <= absl::ZeroDuration() ||
      config.cluster.startup_timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--startup_timeout must be positive and finite, got ",
                     absl::FormatDuration(config.cluster.startup_timeout)));
  }
  config.supervisor.restart = absl::GetFlag(FLAGS_restart);
  config.supervisor.backoff_initial = absl::GetFlag(FLAGS_restart_backoff);
  config.supervisor.backoff_max = absl::GetFlag(FLAGS_restart_backoff_max);
  // Without a positive delay, a task that dies at once is relaunched in a
  // tight loop.
  if (config.supervisor.backoff_initial <= absl::ZeroDuration() ||
      config.supervisor.backoff_max < config.supervisor.backoff_initial) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--restart_backoff must be positive and at most "
        "--restart_backoff_max, got ",
        absl::FormatDuration(config.supervisor.backoff_initial), " and ",
        absl::FormatDuration(config.supervisor.backoff_max)));
  }
  config.supervisor.stop_grace = absl::GetFlag(FLAGS_task_stop_grace);
  if (config.supervisor.stop_grace <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--task_stop_grace must be positive, got ",
                     absl::FormatDuration(config.supervisor.stop_grace)));
  }
  config.agent_binary = absl::GetFlag(FLAGS_agent_binary);
  config.ps_binary = absl::GetFlag(FLAGS_ps_binary);
  config.cpu_devices = absl::GetFlag(FLAGS_cpu_devices);
  if (config.cpu_devices < 1) {
    return absl::InvalidArgumentError("--cpu_devices must be at least 1");
  }
  config.task_log_dir = absl::GetFlag(FLAGS_task_log_dir);
  config.agent_stop_timeout = absl::GetFlag(FLAGS_agent_stop_timeout);
  if (config.agent_stop_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--agent_stop_timeout must be positive");
  }
  config.task_orphan_timeout = absl::GetFlag(FLAGS_task_orphan_timeout);
  if (config.task_orphan_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--task_orphan_timeout must be 0 (never) or positive");
  }
  config.jobs.placement_timeout = absl::GetFlag(FLAGS_placement_timeout);
  if (config.jobs.placement_timeout <= absl::ZeroDuration() ||
      config.jobs.placement_timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--placement_timeout must be positive and finite, got ",
                     absl::FormatDuration(config.jobs.placement_timeout)));
  }
  config.jobs.finished_jobs_kept = absl::GetFlag(FLAGS_finished_jobs_kept);
  if (config.jobs.finished_jobs_kept < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--finished_jobs_kept must be at least 1, got ",
                     config.jobs.finished_jobs_kept));
  }
  config.new_cluster = absl::GetFlag(FLAGS_new_cluster);
  return config;
}

int Main(int argc, char** argv) {
  BlockTerminationSignals();
  ParseFlagsOnlyCommandLine(argc, argv, kUsage);
  absl::StatusOr<CoordinatorConfig> config = ConfigFromFlags();
  if (!config.ok()) ExitWithConfigError(config.status());
  if (absl::Status logging = InitLogging("coordinator", "", config->log_level);
      !logging.ok()) {
    ExitWithConfigError(logging);
  }
  for (const std::string& warning :
       rpc::SecretFileWarnings(config->security_files)) {
    spdlog::warn("{}", warning);
  }
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Create(*std::move(config));
  if (!server.ok()) ExitWithConfigError(server.status());
  if (absl::Status started = (*server)->Start(); !started.ok()) {
    spdlog::error("cannot start: {}", started.ToString());
    // As for a task (task_runtime.cc): an address this host cannot bind is
    // a configuration error; a port in use may come free.
    return absl::IsFailedPrecondition(started) ? kExitConfigError
                                               : kExitFailure;
  }
  NotifyReady(absl::StrCat("serving on ", (*server)->address()));
  std::unique_ptr<SystemdWatchdog> watchdog =
      SystemdWatchdog::Start([&server](absl::Duration timeout) {
        return (*server)->Answers(timeout);
      });

  TerminationWaiter waiter;
  const int signal = waiter.Wait();
  spdlog::info("received signal {}; shutting down", signal);
  NotifyStopping();
  watchdog.reset();
  (*server)->Shutdown();
  return 0;
}

}  // namespace
}  // namespace cohort::coordinator

int main(int argc, char** argv) {
  return cohort::coordinator::Main(argc, argv);
}
