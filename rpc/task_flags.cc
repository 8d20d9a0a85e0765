// Flags of the task daemons (cohort-agent, cohort-ps).

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "rpc/task_runtime.h"

ABSL_FLAG(std::string, task, "",
          "This task's identity, TYPE:INDEX (e.g. worker:1). Default: the "
          "\"task\" of TF_CONFIG.");
ABSL_FLAG(std::string, coordinator, "",
          "The coordinator's HOST:PORT. Default: $COHORT_COORDINATOR.");
ABSL_FLAG(std::string, advertise_address, "",
          "The address registered with the coordinator, as the cluster spec "
          "names it. Default: --listen.");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(1),
          "How often to heartbeat the coordinator.");

namespace cohort::rpc {

absl::StatusOr<TaskConfig> TaskConfigFromFlags(
    const std::vector<std::string>& allowed_types) {
  TaskConfig config;
  std::optional<ClusterSpec> tf_config;
  absl::StatusOr<ClusterSpec> env = ClusterSpec::FromEnvironment();
  if (env.ok()) {
    tf_config = *std::move(env);
  } else if (env.status().code() != absl::StatusCode::kNotFound) {
    return env.status();
  }

  const std::string task_flag = absl::GetFlag(FLAGS_task);
  if (!task_flag.empty()) {
    absl::StatusOr<TaskId> task = ParseTaskId(task_flag);
    if (!task.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--task: ", task.status().message()));
    }
    config.task = *task;
  } else if (tf_config.has_value() && tf_config->task().has_value()) {
    config.task = *tf_config->task();
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
  if (tf_config.has_value()) {
    absl::StatusOr<std::string> address = tf_config->address(config.task);
    if (address.ok()) default_listen = *address;
  }
  if (!ListenFlagGiven() && default_listen.empty()) {
    return absl::InvalidArgumentError(
        "--listen is required (or TF_CONFIG listing this task's address)");
  }
  COHORT_ASSIGN_OR_RETURN(config.daemon, DaemonFlagsFromFlags(default_listen));

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
  config.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  if (config.heartbeat_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--heartbeat_interval must be positive");
  }
  return config;
}

}  // namespace cohort::rpc
