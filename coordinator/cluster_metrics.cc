#include "coordinator/cluster_metrics.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace cohort::coordinator {
namespace {

std::string TaskName(const v1::TaskId& task) {
  return absl::StrCat(task.type(), ":", task.index());
}

// "JOB_RUNNING" -> "running", "READY" -> "ready".
std::string StateLabel(const std::string& enum_name) {
  return absl::AsciiStrToLower(absl::StripPrefix(enum_name, "JOB_"));
}

}  // namespace

void WriteClusterMetrics(const std::vector<v1::TaskStatus>& tasks,
                         const std::vector<v1::JobStatus>& jobs,
                         MetricWriter& out) {
  for (const v1::TaskStatus& t : tasks) {
    const std::string task = TaskName(t.task());
    // One series per state, 1 for the current one, as kube-state-metrics
    // does: `cohort_task_state{state="dead"} == 1` finds the dead.
    for (int s = v1::TaskState_MIN; s <= v1::TaskState_MAX; ++s) {
      if (s == v1::TASK_STATE_UNSPECIFIED || !v1::TaskState_IsValid(s)) {
        continue;
      }
      out.Gauge("cohort_task_state", "1 for the task's current state.",
                {{"task", task}, {"state", StateLabel(v1::TaskState_Name(s))}},
                t.state() == s ? 1 : 0);
    }
    if (t.last_heartbeat_age_ms() >= 0) {
      out.Gauge("cohort_task_heartbeat_age_seconds",
                "Time since the task's last heartbeat.", {{"task", task}},
                t.last_heartbeat_age_ms() / 1000.0);
    }
    out.Counter("cohort_task_restarts_total",
                "Times the coordinator relaunched the task.", {{"task", task}},
                t.restart_count());
  }

  std::map<int, int> by_state;
  for (int s = v1::JobState_MIN; s <= v1::JobState_MAX; ++s) {
    if (s != v1::JOB_STATE_UNSPECIFIED && v1::JobState_IsValid(s)) {
      by_state[s] = 0;
    }
  }
  for (const v1::JobStatus& job : jobs) {
    ++by_state[job.state()];
    const MetricLabels labels = {{"job", job.job_id()},
                                 {"name", job.spec().name()}};
    for (const auto& [state, unused] : by_state) {
      MetricLabels with_state = labels;
      with_state.emplace_back(
          "state",
          StateLabel(v1::JobState_Name(static_cast<v1::JobState>(state))));
      out.Gauge("cohort_job_state", "1 for the job's current state.",
                with_state, job.state() == state ? 1 : 0);
    }
    out.Gauge("cohort_job_step", "Steps the job has completed.", labels,
              static_cast<double>(job.step()));
    out.Gauge("cohort_job_steps_per_second", "The job's recent step rate.",
              labels, job.steps_per_second());
    out.Counter("cohort_job_restarts_total",
                "Attempts of the job that failed and were restarted.", labels,
                job.restarts_size());
    for (const auto& [metric, value] : job.metrics()) {
      MetricLabels with_metric = labels;
      with_metric.emplace_back("metric", metric);
      out.Gauge("cohort_job_metric",
                "The last value of a metric the job's step reported.",
                with_metric, value);
    }
  }
  for (const auto& [state, count] : by_state) {
    out.Gauge(
        "cohort_jobs", "Jobs by state.",
        {{"state",
          StateLabel(v1::JobState_Name(static_cast<v1::JobState>(state)))}},
        count);
  }
}

std::string ServiceDiscoveryJson(const std::string& coordinator_metrics,
                                 const std::vector<v1::TaskStatus>& tasks) {
  nlohmann::json groups = nlohmann::json::array();
  auto add = [&](const std::string& address, const std::string& task) {
    groups.push_back({{"targets", {address}}, {"labels", {{"task", task}}}});
  };
  if (!coordinator_metrics.empty()) add(coordinator_metrics, "coordinator");
  for (const v1::TaskStatus& t : tasks) {
    if (!t.metrics_address().empty()) {
      add(t.metrics_address(), TaskName(t.task()));
    }
  }
  return groups.dump();
}

}  // namespace cohort::coordinator
