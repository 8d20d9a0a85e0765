#include "coordinator/sync_monitor.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort::coordinator {
namespace {

std::string ReportTask(const v1::AgentJobReport& r) {
  return TaskId{r.task().type(), r.task().index()}.ToString();
}

}  // namespace

SyncVerdict JudgeSyncAttempt(const Job& job,
                             const std::vector<AgentView>& agents,
                             absl::Time now, const JobManagerOptions& options) {
  using Kind = SyncVerdict::Kind;
  int running = 0, finished = 0;
  const v1::AgentJobReport* permanent = nullptr;
  const v1::AgentJobReport* failed = nullptr;
  const AgentView* dead = nullptr;
  // Whether any failure seen was more than an agent's checkpointed leave: a
  // crash beside a leave still spends a restart.
  bool left = false, lost_otherwise = false;
  SyncVerdict verdict;
  for (const auto& [task, assignment] : job.assignments) {
    const AgentView* view =
        FindView(agents, ParseTaskId(task).value_or(TaskId{}));
    auto it = job.reports.find(task);
    // An agent whose replicas all finished has nothing left to lose.
    const bool done = it != job.reports.end() &&
                      it->second.state() == v1::AgentJobReport::FINISHED;
    if (view != nullptr && view->state != v1::READY && !done) {
      if (dead == nullptr) dead = view;
      if (!absl::StartsWith(view->last_error, kDeregisteredError)) {
        lost_otherwise = true;
      }
    }
    if (it == job.reports.end()) continue;
    const v1::AgentJobReport& report = it->second;
    switch (report.state()) {
      case v1::AgentJobReport::RUNNING:
        ++running;
        break;
      case v1::AgentJobReport::FINISHED:
        ++finished;
        break;
      case v1::AgentJobReport::FAILED:
        if (report.permanent() && permanent == nullptr) permanent = &report;
        if (failed == nullptr) failed = &report;
        if (report.agent_left()) {
          left = true;
        } else {
          lost_otherwise = true;
        }
        break;
      default:
        break;
    }
  }
  const int agents_in_job = static_cast<int>(job.assignments.size());
  if (finished == agents_in_job) {
    verdict.kind = Kind::kSucceeded;
    return verdict;
  }
  if (failed == nullptr && dead == nullptr) {
    if (running + finished == agents_in_job) {
      verdict.kind = Kind::kRunning;
    } else if (const absl::Duration timeout = PlacementTimeout(job, options);
               job.status.state() != v1::JOB_RUNNING &&
               now - job.placing_since > timeout) {
      std::vector<std::string> slow;
      for (const auto& [task, assignment] : job.assignments) {
        auto it = job.reports.find(task);
        if (it == job.reports.end() ||
            it->second.state() == v1::AgentJobReport::LOADING) {
          slow.push_back(task);
        }
      }
      verdict.kind = Kind::kEnd;
      verdict.cause = absl::StrCat(
          "the attempt did not start within ", absl::FormatDuration(timeout),
          ": no replicas running on ", absl::StrJoin(slow, ", "));
    }
    return verdict;
  }
  if (dead != nullptr) {
    verdict.abort = absl::StrCat(
        dead->task.ToString(), " is gone (", v1::TaskState_Name(dead->state),
        dead->last_error.empty() ? "" : ": ", dead->last_error,
        "); its peers stop waiting for it");
  }
  verdict.agent_left = left && !lost_otherwise;
  const absl::Time failing_since = job.failing_since.value_or(now);
  if (permanent == nullptr && now - failing_since < options.failure_grace) {
    verdict.kind = Kind::kFailing;
    return verdict;
  }
  verdict.kind = Kind::kEnd;
  const std::string at_step =
      absl::StrCat(" (at step ", job.status.step(), ")");
  if (permanent != nullptr) {
    verdict.permanent = true;
    verdict.cause =
        absl::StrCat(ReportTask(*permanent), ": ", permanent->error());
  } else if (dead != nullptr) {
    // A task that deregistered was stopped (SIGTERM), not lost.
    const bool stopped = absl::StartsWith(dead->last_error, kDeregisteredError);
    verdict.cause = absl::StrCat(
        dead->task.ToString(), stopped ? " stopped" : " died",
        dead->last_error.empty() ? "" : ": ", dead->last_error, at_step);
  } else {
    verdict.cause =
        absl::StrCat(ReportTask(*failed), ": ", failed->error(), at_step);
  }
  return verdict;
}

}  // namespace cohort::coordinator
