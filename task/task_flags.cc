// Flags of the task daemons (cohort-agent, cohort-ps).

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/allocator.h"
#include "common/cluster_resolver.h"
#include "common/flags.h"
#include "common/host_port.h"
#include "common/logging.h"
#include "common/signals.h"
#include "common/status_macros.h"
#include "rpc/security.h"
#include "spdlog/spdlog.h"
#include "task/task_runtime.h"

ABSL_FLAG(std::string, task, "",
          "This task's identity, TYPE:INDEX (e.g. worker:1). Default: the "
          "\"task\" of TF_CONFIG.");
ABSL_FLAG(std::string, coordinator, "",
          "The coordinator's HOST:PORT. Default: $COHORT_COORDINATOR.");
ABSL_FLAG(std::string, advertise_address, "",
          "The address registered with the coordinator, as the cluster spec "
          "names it. Default: --listen, or, where that is 0.0.0.0:PORT or "
          "[::]:PORT, TF_CONFIG's address for this task.");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(1),
          "The longest time between heartbeats to the coordinator, which "
          "may ask for them more often (a fifth of its --heartbeat_timeout).");
ABSL_FLAG(absl::Duration, orphan_timeout, absl::ZeroDuration(),
          "Exit (code 1) when the coordinator has not answered for this long; "
          "0: retry for ever (systemd, Kubernetes). The coordinator sets it "
          "for the tasks it launches, so that none outlives it for good.");

namespace cohort::task {

absl::StatusOr<TaskConfig> TaskConfigFromFlags(
    const std::vector<std::string>& allowed_types) {
  TaskConfig config;
  std::optional<ClusterResolver> resolver;
  absl::StatusOr<ClusterResolver> from_env = ClusterResolver::FromTfConfig();
  if (from_env.ok()) {
    resolver = *std::move(from_env);
  } else if (from_env.status().code() != absl::StatusCode::kNotFound) {
    return from_env.status();
  }

  const std::string task_flag = absl::GetFlag(FLAGS_task);
  if (!task_flag.empty()) {
    absl::StatusOr<TaskId> task = ParseTaskId(task_flag);
    if (!task.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--task: ", task.status().message()));
    }
    // A flag that contradicts TF_CONFIG's cluster is caught here, before
    // the coordinator would refuse it.
    if (resolver.has_value()) {
      if (absl::Status set = resolver->SetTask(*task); !set.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--task: ", set.message(), " of TF_CONFIG"));
      }
    }
    config.task = *task;
  } else if (resolver.has_value() && resolver->task().ok()) {
    config.task = *resolver->task();
  } else {
    return absl::InvalidArgumentError(
        "--task is required (or TF_CONFIG with a \"task\" section)");
  }
  if (std::find(allowed_types.begin(), allowed_types.end(), config.task.type) ==
      allowed_types.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--task: this daemon runs ", absl::StrJoin(allowed_types, " or "),
        " tasks, not ", config.task.type));
  }

  // Without --listen, serve where TF_CONFIG puts this task.
  std::string default_listen;
  if (resolver.has_value()) {
    default_listen = resolver->task_address().value_or("");
  }
  if (!rpc::ListenFlagGiven() && default_listen.empty()) {
    return absl::InvalidArgumentError(
        "--listen is required (or TF_CONFIG listing this task's address)");
  }
  COHORT_ASSIGN_OR_RETURN(config.daemon,
                          rpc::DaemonFlagsFromFlags(default_listen));
  config.listen_from_tf_config = !rpc::ListenFlagGiven();

  config.coordinator = absl::GetFlag(FLAGS_coordinator);
  if (config.coordinator.empty()) {
    const char* env_coordinator = std::getenv("COHORT_COORDINATOR");
    if (env_coordinator != nullptr) config.coordinator = env_coordinator;
  }
  if (config.coordinator.empty()) {
    return absl::InvalidArgumentError(
        "--coordinator is required (or $COHORT_COORDINATOR)");
  }
  if (absl::StatusOr<HostPort> parsed = ParseHostPort(config.coordinator);
      !parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--coordinator: ", parsed.status().message()));
  }
  config.advertise_address = absl::GetFlag(FLAGS_advertise_address);
  // Serving on every interface, a task registers TF_CONFIG's address for
  // it: TensorFlow's servers, too, bind every interface at the spec's port.
  const HostPort listen =
      ParseHostPort(config.daemon.server.listen, /*allow_port_zero=*/true)
          .value_or(HostPort{});
  if (config.advertise_address.empty() && !default_listen.empty() &&
      listen.IsWildcard()) {
    // Registered there, it is dialled at TF_CONFIG's port: right behind a
    // port mapping (a container's, a Service's), a mistake otherwise.
    const int expected =
        ParseHostPort(default_listen).value_or(HostPort{}).port;
    if (listen.port != expected) {
      config.warnings.push_back(
          absl::StrCat("--listen=", config.daemon.server.listen,
                       " serves port ", listen.port, ", but TF_CONFIG puts ",
                       config.task.ToString(), " at ", default_listen,
                       ", where its peers will dial: right only where a "
                       "port mapping leads there; otherwise listen on port ",
                       expected, ", or pass --advertise_address"));
    }
    config.advertise_address = default_listen;
  }
  config.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  if (config.heartbeat_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--heartbeat_interval must be positive");
  }
  const absl::Duration orphan = absl::GetFlag(FLAGS_orphan_timeout);
  if (orphan < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--orphan_timeout must be 0 (never) or positive");
  }
  if (orphan > absl::ZeroDuration()) config.orphan_timeout = orphan;
  return config;
}

TaskConfig InitTaskDaemon(int argc, char** argv, absl::string_view daemon,
                          absl::string_view usage,
                          const std::vector<std::string>& allowed_types) {
  KeepLargeAllocationsInTheHeap();
  BlockTerminationSignals();
  ParseFlagsOnlyCommandLine(argc, argv, usage);
  absl::StatusOr<TaskConfig> config = TaskConfigFromFlags(allowed_types);
  if (!config.ok()) ExitWithConfigError(config.status());
  if (absl::Status logging = InitLogging(daemon, config->task.ToString(),
                                         config->daemon.log_level);
      !logging.ok()) {
    ExitWithConfigError(logging);
  }
  for (const std::string& warning :
       rpc::SecretFileWarnings(config->daemon.security_files)) {
    spdlog::warn("{}", warning);
  }
  for (const std::string& warning : config->warnings) {
    spdlog::warn("{}", warning);
  }
  return *std::move(config);
}

}  // namespace cohort::task
