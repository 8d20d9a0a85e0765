// The ParameterServer side of the job manager: placing an attempt on the
// worker agents and ps tasks, and the closure exchange, through which the
// coordinator acts as TF's ClusterCoordinator. ps_monitor.h judges a
// running attempt.

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/job_manager.h"
#include "coordinator/ps_monitor.h"

namespace cohort::coordinator {

void JobManager::PlaceParameterServer(Job& job,
                                      const std::vector<AgentView>& agents,
                                      absl::Time now) {
  const v1::JobSpec& spec = job.status.spec();
  const std::vector<TaskId> ps_tasks = PsTasks(spec_);
  if (ps_tasks.empty()) {
    Finish(job, v1::JOB_FAILED,
           "strategy ParameterServer needs ps tasks, and the cluster has none",
           now);
    return;
  }
  std::vector<TaskId> tasks = JobTasks(spec_, spec);
  const size_t num_workers = tasks.size();
  tasks.insert(tasks.end(), ps_tasks.begin(), ps_tasks.end());
  Readiness readiness = CheckReady(tasks, agents);
  NoteWaiting(job, readiness.not_ready);
  if (!readiness.not_ready.empty()) {
    const absl::Duration timeout = PlacementTimeout(job, options_);
    if (now - job.placing_since > timeout) {
      Finish(
          job, v1::JOB_FAILED,
          absl::StrCat("tasks not ready within ", absl::FormatDuration(timeout),
                       ": ", absl::StrJoin(readiness.not_ready, ", ")),
          now);
    }
    return;
  }
  const std::vector<const AgentView*> ready(
      readiness.ready.begin(), readiness.ready.begin() + num_workers);
  absl::StatusOr<int> placed = PlacePsExecutors(spec, ready);
  if (!placed.ok()) {
    Finish(job, v1::JOB_FAILED, std::string(placed.status().message()), now);
    return;
  }
  const int executors = *placed;
  v1::JobStatus& status = job.status;
  job.placing_since = now;
  status.set_attempt(status.attempt() + 1);
  status.set_num_replicas(static_cast<int>(ready.size()) * executors);
  status.set_communication_note(absl::StrCat(
      "ParameterServer: ", ready.size(), " worker(s) x ", executors,
      " closure executor(s), variables on ", ps_tasks.size(), " ps task(s)"));
  status.clear_placement();
  job.reports.clear();
  job.failing_since.reset();
  job.lost.clear();
  job.failures_in_a_row.clear();
  job.ps_down_since.clear();
  if (job.closures != nullptr && job.closures->client_scheduled()) {
    // The client's calls, and the results it has yet to read, carry over
    // to the new attempt; what ran on the old one runs again.
    job.closures->RequeueAll();
  } else {
    job.closures = std::make_unique<ClosureScheduler>(spec.steps(), status);
  }
  int64_t sequence = 0;
  (void)absl::SimpleAtoi(status.job_id(), &sequence);
  for (size_t node = 0; node < ready.size(); ++node) {
    const std::string task = ready[node]->task.ToString();
    v1::AgentJobAssignment a;
    a.set_job_id(status.job_id());
    a.set_attempt(status.attempt());
    *a.mutable_spec() = spec;
    a.set_node(static_cast<int>(node));
    a.set_num_nodes(static_cast<int>(ready.size()));
    a.set_local_replicas(executors);
    a.set_first_rank(static_cast<int>(node) * executors);
    a.set_num_replicas(status.num_replicas());
    a.set_group(PsGroup(job, task));
    a.set_checkpoint_dir(status.checkpoint_dir());
    a.set_job_uid(status.uid());
    for (int e = 0; e < executors; ++e) {
      a.add_device_indices(e % ready[node]->num_devices);
    }
    for (const TaskId& ps : ps_tasks) {
      a.add_ps_addresses(spec_.address(ps).value_or(std::string()));
    }
    a.set_job_sequence(sequence);
    job.assignments[task] = a;
    status.add_placement(absl::StrCat(
        task, " (", executors, executors == 1 ? " executor)" : " executors)"));
  }
  for (const TaskId& ps : ps_tasks) {
    status.add_placement(absl::StrCat(ps.ToString(), " (variables)"));
  }
  job.changed = true;
}

namespace {

// How often the current runner of a lost worker asks again.
constexpr absl::Duration kLostWorkerRetry = absl::Milliseconds(200);

}  // namespace

absl::StatusOr<v1::ClosureResponse> JobManager::RunClosures(
    const v1::ClosureRequest& request, absl::Time now) {
  const std::string task =
      TaskId{request.task().type(), request.task().index()}.ToString();
  absl::MutexLock lock(&mu_);
  Job* job = ActiveJob();
  if (job == nullptr || job->status.job_id() != request.job_id() ||
      job->status.attempt() != request.attempt() || job->closures == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", request.job_id(), " attempt ", request.attempt(),
                     " is not running"));
  }
  auto assignment = job->assignments.find(task);
  if (assignment == job->assignments.end() ||
      assignment->second.group() != request.group()) {
    // A runner from before its worker was lost: it stops, and the agent
    // starts the assignment's current one.
    return absl::FailedPreconditionError(
        absl::StrCat(task, " (", request.group(), ") has no part in job ",
                     request.job_id(), " now"));
  }
  for (const v1::PsRecovery& recovery : request.recoveries()) {
    RecordRecovery(*job, recovery, now);
  }
  if (job->lost.count(task) > 0) {
    // The current runner of a worker not seen READY since it was lost (its
    // link came back before its registration did). It waits, handed
    // nothing that a second loss would strand; refused, it would end, and
    // its agent would start no other for an assignment that stays the same.
    v1::ClosureResponse wait;
    wait.set_retry_after_ms(absl::ToInt64Milliseconds(kLostWorkerRetry));
    return wait;
  }
  std::vector<v1::ClosureResult> completed(request.completed().begin(),
                                           request.completed().end());
  for (v1::ClosureResult& result : completed) {
    if (result.time_unix_ms() == 0) {
      result.set_time_unix_ms(absl::ToUnixMillis(now));
    }
  }
  v1::ClosureResponse response =
      job->closures->Exchange(absl::StrCat(task, "/", request.slot()),
                              completed, std::clamp(request.want(), 0, 1));
  if (!completed.empty()) {
    job->closures->Fill(job->status);
    job->failures_in_a_row.erase(task);
    // Saved at the next tick, not with the periodic progress, so that a
    // restarted coordinator hands out again only closures completed in
    // that last tick.
    job->changed = true;
  }
  if (job->status.state() != v1::JOB_RUNNING) {
    job->status.set_state(v1::JOB_RUNNING);
    job->changed = true;
  }
  return response;
}

void JobManager::CheckParameterServer(Job& job,
                                      const std::vector<AgentView>& agents,
                                      absl::Time now) {
  const PsVerdict verdict = CheckPsAttempt(job, PsTasks(spec_), agents, now,
                                           PlacementTimeout(job, options_));
  switch (verdict.kind) {
    case PsVerdict::Kind::kGoesOn:
      return;
    case PsVerdict::Kind::kSucceeded:
      Finish(job, v1::JOB_SUCCEEDED, "", now);
      return;
    case PsVerdict::Kind::kFailed:
      Finish(job, v1::JOB_FAILED, verdict.error, now);
      return;
  }
}

}  // namespace cohort::coordinator
