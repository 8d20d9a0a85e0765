#include "common/cluster_resolver.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace cohort {

absl::StatusOr<ClusterResolver> ClusterResolver::FromTfConfig() {
  COHORT_ASSIGN_OR_RETURN(ClusterSpec spec, ClusterSpec::FromEnvironment());
  return ClusterResolver(std::move(spec));
}

absl::StatusOr<ClusterResolver> ClusterResolver::FromFile(
    const std::string& path) {
  COHORT_ASSIGN_OR_RETURN(ClusterSpec spec, ClusterSpec::FromFile(path));
  return ClusterResolver(std::move(spec));
}

ClusterResolver::ClusterResolver(ClusterSpec spec)
    : spec_(std::move(spec)), task_(spec_.task()) {}

absl::StatusOr<TaskId> ClusterResolver::task() const {
  if (!task_.has_value()) {
    return absl::FailedPreconditionError(
        "no task: the cluster spec has no \"task\" section and none was given");
  }
  return *task_;
}

absl::Status ClusterResolver::SetTask(const TaskId& task) {
  if (!spec_.address(task).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task ", task.ToString(), " is not in the cluster spec (it has ",
        spec_.num_tasks(task.type), " ", task.type, " task(s))"));
  }
  task_ = task;
  return absl::OkStatus();
}

absl::StatusOr<std::string> ClusterResolver::task_address() const {
  COHORT_ASSIGN_OR_RETURN(TaskId task, this->task());
  return spec_.address(task);
}

}  // namespace cohort
