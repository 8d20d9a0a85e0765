#pragma once

// The cluster description, in TensorFlow's TF_CONFIG schema:
//
//   {"cluster": {"chief": ["host:2222"], "worker": ["host:2223", ...],
//                "ps": ["host:2224"], "evaluator": ["host:2225"]},
//    "task": {"type": "worker", "index": 0},
//    "environment": "cloud", "rpc_layer": "grpc"}
//
// Only `cluster` is required. Kubeflow's training operator writes the same
// shape (and may add keys such as "environment"); unknown top-level keys are
// accepted, unknown task types are not.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/host_port.h"

namespace cohort {

// Task types, as TF_CONFIG spells them.
inline constexpr absl::string_view kChief = "chief";
inline constexpr absl::string_view kWorker = "worker";
inline constexpr absl::string_view kPs = "ps";
inline constexpr absl::string_view kEvaluator = "evaluator";

// True for the four task types above.
bool IsKnownTaskType(absl::string_view type);

// A task's identity: "worker:1".
struct TaskId {
  std::string type;
  int index = 0;

  std::string ToString() const;
  friend bool operator==(const TaskId& a, const TaskId& b) = default;
  friend auto operator<=>(const TaskId& a, const TaskId& b) = default;
};

// Parses "worker:1". Errors name the input.
absl::StatusOr<TaskId> ParseTaskId(absl::string_view text);

// An immutable, validated cluster spec. Copyable value type; thread-compatible.
class ClusterSpec {
 public:
  // Parses and validates TF_CONFIG JSON. On failure the status is
  // INVALID_ARGUMENT with one line: "<json path>: <what is wrong>", e.g.
  // "$.cluster.worker[1]: port 70000 is out of range 1..65535".
  static absl::StatusOr<ClusterSpec> FromJson(absl::string_view json);
  // Reads a file and parses it; the error names the file.
  static absl::StatusOr<ClusterSpec> FromFile(const std::string& path);
  // Reads the TF_CONFIG environment variable; NOT_FOUND when it is unset.
  static absl::StatusOr<ClusterSpec> FromEnvironment();

  // Task types present, in a stable order: chief, worker, ps, evaluator.
  std::vector<std::string> task_types() const;
  // Number of tasks of `type` (0 when absent).
  int num_tasks(absl::string_view type) const;
  // Every task, in task_types() order then by index.
  std::vector<TaskId> tasks() const;
  // The address of a task, or NOT_FOUND naming it.
  absl::StatusOr<std::string> address(const TaskId& task) const;
  // The task whose address is `address`, if any.
  std::optional<TaskId> FindByAddress(absl::string_view address) const;

  // The optional `task` section of TF_CONFIG.
  const std::optional<TaskId>& task() const { return task_; }

  // Canonical JSON (cluster and task only), parseable by FromJson.
  std::string ToJson() const;

 private:
  std::map<std::string, std::vector<std::string>> cluster_;
  std::optional<TaskId> task_;
};

}  // namespace cohort
