#pragma once

// The coordinator's job table and each job's lifecycle:
//
//   SUBMITTED -> PLACING -> RUNNING -> SUCCEEDED
//                  ^           |  \--> FAILED (permanent error, or restarts
//                  |           v                spent)
//                  +------ RESTARTING           CANCELLED (any time)
//
// One job runs at a time, the others wait in submission order. PLACING
// waits for the job's agents to be READY, checks the placement (devices,
// batch divisibility), then hands each agent its assignment through Sync.
// When an attempt fails because a task died or a collective broke, the job
// restarts from its last checkpoint while restarts are left; a failure the
// job itself caused (a bad library, a step that returned an error) fails it
// at once. An attempt that ended because an agent was stopped, after every
// replica checkpointed, restarts without counting: it is no failure.
//
// The manager owns the table and applies decisions made elsewhere:
// job_validation.h checks a spec, placement.h places an attempt (and makes
// the AUTO choice), sync_monitor.h and ps_monitor.h judge a running one.
//
// Pure logic: no threads, no RPCs, no disk. The caller passes the time and
// the tasks' states, so unit tests drive it with fakes.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/v1/job.pb.h"
#include "common/cluster_spec.h"
#include "coordinator/job.h"
#include "coordinator/job_validation.h"
#include "coordinator/placement.h"

namespace cohort::coordinator {

// Thread-safe: every method takes the internal mutex briefly.
class JobManager {
 public:
  JobManager(ClusterSpec spec, JobManagerOptions options);

  const ClusterSpec& spec() const { return spec_; }

  // INVALID_ARGUMENT naming the field for a malformed spec. The library
  // must already be stored under spec.library_digest. A spec whose
  // submission_id a job in the table was submitted with gets that job's id
  // and `*repeated` set (when given), or ALREADY_EXISTS naming the job when
  // the two specs differ.
  absl::StatusOr<std::string> Submit(const v1::JobSpec& spec, absl::Time now,
                                     bool* repeated = nullptr);
  // Submit's checks of the spec against the cluster, without submitting:
  // asked before a submission's library is stored, so that a refused one
  // leaves none behind.
  absl::Status CheckSubmittable(const v1::JobSpec& spec) const;
  // The job that `spec`'s submission_id was submitted with, if any, as
  // Submit would find it; nullopt when none (or the spec has no id).
  absl::StatusOr<std::optional<std::string>> FindSubmission(
      const v1::JobSpec& spec) const;
  // Cancels a job whose submission was not acknowledged, and forgets its
  // submission_id, so that a retry of it makes a job again.
  void Withdraw(const std::string& job_id, absl::Time now,
                const std::string& why);
  // RESOURCE_EXHAUSTED while options_.unended_jobs_max jobs have not ended:
  // asked before a submission's library is stored, and again by Submit.
  absl::Status CheckRoomForAJob() const;
  absl::StatusOr<v1::JobStatus> Get(const std::string& job_id) const;
  std::vector<v1::JobStatus> List() const;
  // Ends the job CANCELLED with `why` as its error, unless it has ended.
  absl::StatusOr<v1::JobStatus> Cancel(
      const std::string& job_id, absl::Time now,
      const std::string& why = "cancelled on request");

  // An agent's report; returns the job it should be running.
  v1::AgentSyncResponse Sync(const v1::AgentJobReport& report, absl::Time now);

  // ParameterServer jobs: a worker executor's results and its request for
  // the next closure. FAILED_PRECONDITION when the job is not running that
  // attempt on that task any more.
  absl::StatusOr<v1::ClosureResponse> RunClosures(
      const v1::ClosureRequest& request, absl::Time now);

  // ClusterCoordinator on a schedule_from_client ParameterServer job
  // (job_manager_calls.cc). Each counts as the client's sign of life.
  // Errors name the job; NOT_FOUND for an unknown one.
  // Schedule holds the calls until ScheduleSaved() says whether the table
  // holding them was saved: released to the workers, or taken back.
  absl::StatusOr<std::vector<int64_t>> Schedule(
      const std::string& job_id, std::vector<v1::ScheduledCall> calls,
      absl::Time now);
  void ScheduleSaved(const std::string& job_id, bool saved);
  absl::StatusOr<v1::GetCallsResponse> GetCalls(
      const v1::GetCallsRequest& request, absl::Time now);
  absl::Status FinishScheduling(const std::string& job_id, absl::Time now);
  // The ps tasks' addresses, by index, for reading a ParameterServer job's
  // variables; FAILED_PRECONDITION for a job of another strategy.
  absl::StatusOr<std::vector<std::string>> PsAddresses(
      const std::string& job_id, absl::Time now);

  // Advances the active job: placement, failure decisions, restarts, the
  // next job in the queue. Call periodically (every 100 ms or so).
  void Tick(const std::vector<AgentView>& agents, absl::Time now);
  // Records the active job as succeeded if everything it ran has finished,
  // and changes nothing else: no placement, failure or restart. For a
  // coordinator that stops, after its tasks did and before its last save,
  // so that a job whose last steps ended in the stop's grace is not rerun.
  void SettleFinished(const std::vector<AgentView>& agents, absl::Time now);

  // The library digest of every job in the table, ended or not.
  absl::flat_hash_set<std::string> LibraryDigests() const;

  // Store key prefixes ("job-3/attempt-2/", "job-3/") of attempts and jobs
  // that ended since the last call: nothing will read those keys again.
  std::vector<std::string> TakeRetiredGroups();

  // Persistence: the whole table (a v1::JobTable as proto JSON), when it
  // changed since the last call (progress alone counts once per
  // `progress_period`); nullopt when it did not. RESOURCE_EXHAUSTED over
  // options.max_table_bytes, INTERNAL when it cannot be printed; the next
  // call tries again.
  absl::StatusOr<std::optional<std::string>> TakeSnapshotIfChanged(
      absl::Time now, absl::Duration progress_period);
  // The last snapshot taken could not be saved: take the next one anyway.
  void MarkUnsaved();
  // Restores a table saved by an earlier coordinator. Jobs that were active
  // resume from their last checkpoint, without spending a restart.
  absl::Status Restore(const std::string& json, absl::Time now);

 private:
  Job* Find(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // NOT_FOUND for a job Find did not find, saying whether it was dropped.
  absl::Status NotFound(const std::string& job_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the jobs that ended first, beyond options_.finished_jobs_kept.
  // Not from Finish: callers hold references into the table across it.
  void DropOldFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckRoomForAJobLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::optional<std::string>> FindSubmissionLocked(
      const v1::JobSpec& spec) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Job* ActiveJob() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The client-scheduled job `job_id`, with its closure scheduler made if
  // the job has not been placed yet; the client was seen `now`.
  absl::StatusOr<Job*> ScheduledJob(const std::string& job_id, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Place(Job& job, const std::vector<AgentView>& agents, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckSync(Job& job, const std::vector<AgentView>& agents, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the current attempt with `cause`: restart or fail. A restart that
  // is not `spent` is not counted against max_restarts.
  void EndAttempt(Job& job, const std::string& cause, bool permanent,
                  absl::Time now, bool spent)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish(Job& job, v1::JobState state, const std::string& error,
              absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateProgress(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Says which tasks an attempt waiting to be placed waits for (none once
  // it is placed), and what `then` happens past the placement timeout; the
  // job changes only when they do.
  void NoteWaiting(Job& job, const std::vector<std::string>& not_ready,
                   absl::string_view then = "the attempt fails")
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The evaluator task's sync (job_manager_eval.cc): files its evaluations
  // with the job they are of, and hands it the job to evaluate, if any.
  void SyncEvaluator(const v1::AgentJobReport& report, absl::Time now,
                     v1::AgentSyncResponse& response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job the evaluator should watch: the active one, or else the newest
  // one while its last checkpoint has not been evaluated; null if neither
  // has an eval function.
  Job* JobToEvaluate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records that the replicas agreed to stop early, and why.
  void NoteStop(Job& job, const v1::AgentJobReport& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records in the attempt's restart record whose checkpoint it resumed.
  void NoteResume(Job& job, const v1::AgentJobReport& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ParameterServer jobs (job_manager_ps.cc).
  void PlaceParameterServer(Job& job, const std::vector<AgentView>& agents,
                            absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckParameterServer(Job& job, const std::vector<AgentView>& agents,
                            absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ClusterSpec spec_;
  const JobManagerOptions options_;
  mutable absl::Mutex mu_;
  absl::BitGen bit_gen_ ABSL_GUARDED_BY(mu_);         // job uids
  std::map<int64_t, Job> jobs_ ABSL_GUARDED_BY(mu_);  // by numeric id
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool changed_ ABSL_GUARDED_BY(mu_) = false;  // besides each job.changed
  bool progressed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_snapshot_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::vector<std::string> retired_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::coordinator
