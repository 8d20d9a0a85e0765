#include "coordinator/job_tasks.h"

#include <algorithm>
#include <string>

namespace cohort::coordinator {

std::vector<TaskId> JobTasks(const v1::JobStatus& job, const ClusterSpec& spec,
                             bool with_ps) {
  std::vector<TaskId> tasks;
  for (const std::string& placed : job.placement()) {
    absl::StatusOr<TaskId> task =
        ParseTaskId(placed.substr(0, placed.find(' ')));
    if (task.ok() && spec.address(*task).ok() &&
        (with_ps || task->type != kPs)) {
      tasks.push_back(*task);
    }
  }
  const bool placed = !tasks.empty();
  const bool uses_ps =
      with_ps && job.spec().strategy() == v1::PARAMETER_SERVER;
  for (const TaskId& task : spec.tasks()) {
    const bool is_agent = task.type == kChief || task.type == kWorker;
    if ((!placed && is_agent) || (uses_ps && task.type == kPs)) {
      if (std::find(tasks.begin(), tasks.end(), task) == tasks.end()) {
        tasks.push_back(task);
      }
    }
  }
  return tasks;
}

}  // namespace cohort::coordinator
