#pragma once

// TensorFlow's TFConfigClusterResolver: the cluster, and which of its tasks
// this process is. The task comes from TF_CONFIG's "task" section, or is set
// from a flag; either way it must be a task of the cluster.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/cluster_spec.h"

namespace cohort {

// Value type; thread-compatible.
class ClusterResolver {
 public:
  // From the TF_CONFIG variable; NOT_FOUND when it is unset.
  static absl::StatusOr<ClusterResolver> FromTfConfig();
  // From a TF_CONFIG-style file.
  static absl::StatusOr<ClusterResolver> FromFile(const std::string& path);

  explicit ClusterResolver(ClusterSpec spec);

  const ClusterSpec& cluster_spec() const { return spec_; }

  // This process's task; FAILED_PRECONDITION when none is known.
  absl::StatusOr<TaskId> task() const;
  // Sets (or overrides) the task; INVALID_ARGUMENT when the cluster has no
  // such task.
  absl::Status SetTask(const TaskId& task);
  // The address the cluster gives this process's task.
  absl::StatusOr<std::string> task_address() const;

 private:
  ClusterSpec spec_;
  std::optional<TaskId> task_;
};

}  // namespace cohort
