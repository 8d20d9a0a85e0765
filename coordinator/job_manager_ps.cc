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
  const std::vector<TaskId> workers = JobTasks(spec_, spec);
  const Readiness ps_ready = CheckReady(ps_tasks, agents);
  const Readiness workers_ready = CheckReady(workers, agents);
  std::vector<std::string> not_ready = workers_ready.not_ready;
  not_ready.insert(not_ready.end(), ps_ready.not_ready.begin(),
                   ps_ready.not_ready.end());
  const absl::Duration timeout = PlacementTimeout(job, options_);
  // Workers come and go in a ParameterServer job: past the placement
  // timeout it starts without those not READY (a worker host gone for
  // good while the coordinator restarted), as if they had been lost in
  // it. Without its variables, or any worker, it cannot.
  const bool without_some_workers =
      ps_ready.not_ready.empty() && !workers_ready.ready.empty();
  NoteWaiting(job, not_ready,
              without_some_workers ? "the attempt starts without them"
                                   : "the attempt fails");
  if (!not_ready.empty()) {
    if (now - job.placing_since <= timeout) return;
    if (!without_some_workers) {
      Finish(
          job, v1::JOB_FAILED,
          absl::StrCat("tasks not ready within ", absl::FormatDuration(timeout),
                       ": ", absl::StrJoin(not_ready, ", ")),
          now);
      return;
    }
    NoteWaiting(job, {});
  }
  absl::StatusOr<int> placed = PlacePsExecutors(spec, workers_ready.ready);
  if (!placed.ok()) {
    Finish(job, v1::JOB_FAILED, std::string(placed.status().message()), now);
    return;
  }
  const int executors = *placed;
  v1::JobStatus& status = job.status;
  job.placing_since = now;
  status.set_attempt(status.attempt() + 1);
  status.set_num_replicas(static_cast<int>(workers.size()) * executors);
  status.set_communication_note(absl::StrCat(
      "ParameterServer: ", workers.size(), " worker(s) x ", executors,
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
  for (size_t node = 0; node < workers.size(); ++node) {
    const std::string task = workers[node].ToString();
    const AgentView* view = FindView(agents, workers[node]);
    v1::AgentJobAssignment a;
    a.set_job_id(status.job_id());
    a.set_attempt(status.attempt());
    *a.mutable_spec() = spec;
    a.set_node(static_cast<int>(node));
    a.set_num_nodes(static_cast<int>(workers.size()));
    a.set_local_replicas(executors);
    a.set_first_rank(static_cast<int>(node) * executors);
    a.set_num_replicas(status.num_replicas());
    a.set_group(PsGroup(job, task));
    a.set_checkpoint_dir(status.checkpoint_dir());
    a.set_job_uid(status.uid());
    a.set_cluster_uid(options_.cluster_uid);
    // A worker not seen yet takes its devices when it is (TakeDevicesOf).
    SetPsDevices(a, executors, view != nullptr ? view->num_devices : 1);
    for (const TaskId& ps : ps_tasks) {
      a.add_ps_addresses(spec_.address(ps).value_or(std::string()));
    }
    a.set_job_sequence(sequence);
    job.assignments[task] = a;
    status.add_placement(absl::StrCat(
        task, " (", executors, executors == 1 ? " executor)" : " executors)"));
    if (view == nullptr || view->state != v1::READY) {
      LoseWorker(job, task,
                 absl::StrCat("not ready when the attempt was placed: ",
                              DescribeTask(workers[node], view)),
                 now);
    }
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
