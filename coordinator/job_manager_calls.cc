// The ClusterCoordinator API of the job manager: the client schedules calls
// onto a schedule_from_client ParameterServer job, reads their results and
// finishes scheduling. The closure exchange (job_manager_ps.cc) hands the
// calls to the workers.

#include "absl/strings/str_cat.h"
#include "coordinator/job_manager.h"
#include "coordinator/placement.h"

namespace cohort::coordinator {

absl::StatusOr<Job*> JobManager::ScheduledJob(const std::string& job_id,
                                              absl::Time now) {
  Job* job = Find(job_id);
  if (job == nullptr) return NotFound(job_id);
  const v1::JobSpec& spec = job->status.spec();
  if (spec.strategy() != v1::PARAMETER_SERVER ||
      !spec.ps().schedule_from_client()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id,
        " runs its own steps; only a ParameterServer job submitted with "
        "ps.schedule_from_client takes scheduled calls"));
  }
  job->client_seen = now;
  // Calls scheduled before placement wait in the scheduler, which the
  // placement keeps.
  if (job->closures == nullptr) {
    job->closures = std::make_unique<ClosureScheduler>(0, job->status);
  }
  return job;
}

absl::StatusOr<std::vector<int64_t>> JobManager::Schedule(
    const std::string& job_id, std::vector<v1::ScheduledCall> calls,
    absl::Time now) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Job*> job = ScheduledJob(job_id, now);
  if (!job.ok()) return job.status();
  if (IsTerminal((*job)->status.state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " has ended (",
                     v1::JobState_Name((*job)->status.state()), ")"));
  }
  absl::StatusOr<std::vector<int64_t>> ids =
      (*job)->closures->Schedule(std::move(calls));
  if (!ids.ok()) {
    return absl::Status(
        ids.status().code(),
        absl::StrCat("job ", job_id, ": ", ids.status().message()));
  }
  (*job)->closures->Fill((*job)->status);
  (*job)->changed = true;
  return ids;
}

void JobManager::ScheduleSaved(const std::string& job_id, bool saved) {
  absl::MutexLock lock(&mu_);
  Job* job = Find(job_id);
  if (job == nullptr || job->closures == nullptr) return;
  if (saved) {
    job->closures->Release();
  } else {
    job->closures->Retract();
  }
  // An ended job keeps no queued calls (Finish).
  if (IsTerminal(job->status.state())) return;
  job->closures->Fill(job->status);
  job->changed = true;
}

absl::StatusOr<v1::GetCallsResponse> JobManager::GetCalls(
    const v1::GetCallsRequest& request, absl::Time now) {
  // The reply is built under the lock that agents' syncs wait on: bounded
  // by the calls the scheduler can answer for, pending or kept.
  constexpr int kMaxIds =
      ClosureScheduler::kMaxPendingCalls + ClosureScheduler::kKeptResults;
  if (request.ids_size() > kMaxIds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job ", request.job_id(), ": asked for ", request.ids_size(),
        " calls at once, over the ", kMaxIds, " allowed"));
  }
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Job*> job = ScheduledJob(request.job_id(), now);
  if (!job.ok()) return job.status();
  v1::GetCallsResponse response;
  for (int64_t id : request.ids()) {
    absl::StatusOr<v1::CallStatus> call = (*job)->closures->Call(id);
    if (!call.ok()) {
      return absl::Status(call.status().code(),
                          absl::StrCat("job ", request.job_id(), ": ",
                                       call.status().message()));
    }
    *response.add_calls() = *std::move(call);
  }
  (*job)->closures->FillCounts(response);
  response.set_job_state((*job)->status.state());
  response.set_job_error((*job)->status.error());
  return response;
}

absl::Status JobManager::FinishScheduling(const std::string& job_id,
                                          absl::Time now) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Job*> job = ScheduledJob(job_id, now);
  if (!job.ok()) return job.status();
  (*job)->closures->FinishScheduling();
  if (IsTerminal((*job)->status.state())) return absl::OkStatus();
  (*job)->closures->Fill((*job)->status);
  (*job)->changed = true;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> JobManager::PsAddresses(
    const std::string& job_id, absl::Time now) {
  absl::MutexLock lock(&mu_);
  Job* job = Find(job_id);
  if (job == nullptr) return NotFound(job_id);
  if (!job->parameter_server()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id,
                     " is not a ParameterServer job: its variables live in "
                     "its replicas and its checkpoints, not on ps tasks"));
  }
  job->client_seen = now;
  std::vector<std::string> addresses;
  for (const TaskId& ps : PsTasks(spec_)) {
    addresses.push_back(spec_.address(ps).value_or(std::string()));
  }
  return addresses;
}

}  // namespace cohort::coordinator
