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
// at once.
//
// Pure logic: no threads, no RPCs, no disk. The caller passes the time and
// the tasks' states, so unit tests drive it with fakes.

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/random/random.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/v1/job.pb.h"
#include "common/cluster_spec.h"
#include "coordinator/closure_scheduler.h"

namespace cohort::coordinator {

// What the job manager needs to know about one task (agents, and the ps
// tasks of ParameterServer jobs).
struct AgentView {
  TaskId task;
  v1::TaskState state = v1::STARTING;
  int num_devices = 0;
  bool cuda = false;       // its devices are CUDA GPUs
  bool nccl = false;       // it was built with NCCL
  std::string last_error;  // why it last died
};

struct JobManagerOptions {
  // After the first failure report of an attempt, how long to wait for the
  // rest (a dead task's exit, a permanent error) before deciding the cause.
  absl::Duration failure_grace = absl::Milliseconds(700);
  // A job whose agents are not all READY this long after placing began
  // fails, naming them.
  absl::Duration placement_timeout = absl::Seconds(120);
  absl::Duration sync_interval = absl::Milliseconds(200);  // told to agents
  // Where checkpoints go when the spec names no directory: <root>/<job id>.
  std::string checkpoint_root;
};

// Thread-safe: every method takes the internal mutex briefly.
class JobManager {
 public:
  JobManager(ClusterSpec spec, JobManagerOptions options);

  // INVALID_ARGUMENT naming the field for a malformed spec. The library
  // must already be stored under spec.library_digest.
  absl::StatusOr<std::string> Submit(const v1::JobSpec& spec, absl::Time now);
  absl::StatusOr<v1::JobStatus> Get(const std::string& job_id) const;
  std::vector<v1::JobStatus> List() const;
  absl::StatusOr<v1::JobStatus> Cancel(const std::string& job_id,
                                       absl::Time now);

  // An agent's report; returns the job it should be running.
  v1::AgentSyncResponse Sync(const v1::AgentJobReport& report, absl::Time now);

  // ParameterServer jobs: a worker executor's results and its request for
  // the next closure. FAILED_PRECONDITION when the job is not running that
  // attempt on that task any more.
  absl::StatusOr<v1::ClosureResponse> RunClosures(
      const v1::ClosureRequest& request, absl::Time now);

  // Advances the active job: placement, failure decisions, restarts, the
  // next job in the queue. Call periodically (every 100 ms or so).
  void Tick(const std::vector<AgentView>& agents, absl::Time now);

  // Persistence: the whole table as JSON, and whether it changed since the
  // last call (progress alone counts once per `progress_period`).
  std::optional<std::string> TakeSnapshotIfChanged(
      absl::Time now, absl::Duration progress_period);
  // The last snapshot taken could not be saved: take the next one anyway.
  void MarkUnsaved();
  // Restores a table saved by an earlier coordinator. Jobs that were active
  // resume from their last checkpoint, without spending a restart.
  absl::Status Restore(const std::string& json, absl::Time now);

 private:
  struct Job {
    v1::JobStatus status;
    absl::Time placing_since;
    // Per agent (task string): its assignment in the current attempt and
    // the last report it sent for it.
    std::map<std::string, v1::AgentJobAssignment> assignments;
    std::map<std::string, v1::AgentJobReport> reports;
    // The first failure of the current attempt, while its cause is decided.
    std::optional<absl::Time> failing_since;
    // A task of the current attempt is DEAD: why, for its survivors to
    // abort with while the cause is decided.
    std::string abort;
    bool active() const;

    // --- ParameterServer jobs.
    std::unique_ptr<ClosureScheduler> closures;
    std::map<std::string, int> epochs;  // per worker: bumped when it is lost
    std::set<std::string> lost;         // workers whose closures re-queued
    std::map<std::string, absl::Time> ps_down_since;
    // Per worker: runner failures since it last finished a closure.
    std::map<std::string, int> failures_in_a_row;
    // Per (ps index, incarnation): the event's index in status.events, the
    // updates its snapshot held, and the most any worker saw acknowledged.
    struct Recovery {
      int event = 0;
      int64_t restored = 0;
      int64_t seen = 0;
    };
    std::map<std::pair<int, uint64_t>, Recovery> recoveries;
  };

  Job* Find(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Job* ActiveJob() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Place(Job& job, const std::vector<AgentView>& agents, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckAttempt(Job& job, const std::vector<AgentView>& agents,
                    absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the current attempt with `cause`: restart or fail.
  void EndAttempt(Job& job, const std::string& cause, bool permanent,
                  absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish(Job& job, v1::JobState state, const std::string& error,
              absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateProgress(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records in the attempt's restart record whose checkpoint it resumed.
  void NoteResume(Job& job, const v1::AgentJobReport& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The agent of the current attempt that holds `rank` of `ring` (a
  // RingLink's ring); "" if none.
  std::string RankOwner(const Job& job, const std::string& ring, int rank) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ParameterServer jobs (job_manager_ps.cc).
  void PlaceParameterServer(Job& job, const std::vector<AgentView>& agents,
                            absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckParameterServer(Job& job, const std::vector<AgentView>& agents,
                            absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LoseWorker(Job& job, const std::string& task, const std::string& why,
                  absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordRecovery(Job& job, const v1::PsRecovery& recovery, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddEvent(Job& job, std::string text, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<TaskId> PsTasks() const;
  // The agents a job runs on, in rank order.
  std::vector<TaskId> JobTasks(const v1::JobSpec& spec) const;

  const ClusterSpec spec_;
  const JobManagerOptions options_;
  mutable absl::Mutex mu_;
  absl::BitGen bit_gen_ ABSL_GUARDED_BY(mu_);  // job uids
  std::map<int64_t, Job> jobs_ ABSL_GUARDED_BY(mu_);  // by numeric id
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool changed_ ABSL_GUARDED_BY(mu_) = false;
  bool progressed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_snapshot_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// INVALID_ARGUMENT naming the field of a malformed spec.
absl::Status ValidateJobSpec(const v1::JobSpec& spec);
absl::Status ValidatePsOptions(const v1::ParameterServerOptions& ps);

// Whether a job in `state` has ended.
bool IsTerminal(v1::JobState state);

}  // namespace cohort::coordinator
