#pragma once

// The agent's side of the job control loop: every sync interval it reports
// its job to the coordinator and learns which job it should run, then
// starts, replaces or stops its runner (SyncJobRunner or PsJobRunner) to
// match. Step libraries are fetched once per digest into a cache directory,
// where those unused for a day are removed.
// The coordinator is reached through a JobControlClient and runners are
// made by a factory, so that tests can drive the loop with fakes.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/cluster_spec.h"
#include "worker_agent/attempt_runner.h"
#include "worker_agent/job_control_client.h"

namespace cohort::agent {

// Makes the runner of one attempt.
using RunnerFactory =
    std::function<std::unique_ptr<AttemptRunner>(RunnerOptions options)>;

// EvaluatorRunner for the evaluator task's assignments, PsJobRunner for
// ParameterServer ones, SyncJobRunner otherwise.
std::unique_ptr<AttemptRunner> MakeRunner(RunnerOptions options);

struct JobAgentOptions {
  TaskId task;
  std::string coordinator;
  rpc::Security security;
  // Default: over gRPC to `coordinator`.
  std::shared_ptr<JobControlClient> job_control;
  RunnerFactory make_runner = MakeRunner;
  std::vector<Device> devices;
  std::string peer_listen_host;     // see RunnerOptions
  std::string peer_advertise_host;  // see RunnerOptions
  PortRange peer_ports;             // see RunnerOptions
  std::string cache_dir;            // where fetched libraries are kept
  // Where this agent keeps its own copy of each job's checkpoints
  // (<checkpoint_copies>/<job id>-<uid>), unless it is the chief, which writes
  // the job's checkpoint_dir.
  std::string checkpoint_copies;
  std::string origin;  // "worker:0 on host-3", for restart records
  // How long an attempt that was ended (replaced, cancelled, or stopped by
  // Shutdown) may take to stop. Its threads may be inside the job's own
  // functions (init, step, dataset, stream), which nothing can interrupt;
  // past this bound `on_stuck` is called.
  absl::Duration stop_timeout = absl::Minutes(2);
  // Default: logs `why` and exits the process with kExitStuckJobCode, so
  // that its supervisor (the coordinator, systemd) restarts it clean rather
  // than leave it running a job nobody wants. Should it return, the runner
  // is destroyed as usual, which waits for it.
  std::function<void(const std::string& why)> on_stuck;
  // How long Leave() waits for the attempt to checkpoint and end.
  absl::Duration leave_timeout = absl::Seconds(10);
};

// Owns its thread between Start() and Leave() or Shutdown() (idempotent),
// and the current runner; shares the JobControlClient with the runners.
// Start, Leave and Shutdown from one thread.
class JobAgent {
 public:
  explicit JobAgent(JobAgentOptions options);
  ~JobAgent();

  void Start();
  // The agent is going away (SIGTERM): stops the loop, then gives the
  // running attempt up to leave_timeout to checkpoint the step under way on
  // every replica and end (AttemptRunner::Leave), and reports that end, or
  // the end of an attempt that ended on its own since the last sync.
  // Before Shutdown, while the task still heartbeats, so that the
  // coordinator does not end the attempt first.
  void Leave();
  void Shutdown();

 private:
  void StopLoop();
  void Run();
  // Reports the runner's state and learns the assignment, once.
  absl::StatusOr<v1::AgentSyncResponse> SyncOnce();
  // Leave's last report of how the attempt ended, tried again for a bounded
  // while when the coordinator is out of reach.
  void ReportEndBeforeLeaving();
  void Apply(const v1::AgentJobAssignment& assignment);
  // Aborts the runner with `why` and destroys it, once it has stopped or
  // after on_stuck (stop_timeout). From the loop, the wait ends early once
  // the agent is told to stop: false then, with the aborted runner left for
  // Shutdown.
  bool StopRunner(const absl::Status& why, bool from_loop);
  // Removes this agent's checkpoint copies of the jobs that the coordinator
  // no longer lists as unended: those it ran since it started and, found
  // at the first call, those claimed for the coordinator's cluster before.
  void PruneCopies(const v1::AgentSyncResponse& response);
  // Every few minutes: removes the cached libraries unused for a day, but
  // for the running job's.
  void RemoveUnusedLibraries();
  // The local path of the library with `digest`, fetching it when needed.
  absl::StatusOr<std::string> FetchLibrary(const std::string& digest);

  const JobAgentOptions options_;
  absl::Notification stop_;
  std::thread thread_;
  std::unique_ptr<AttemptRunner> runner_;  // only the loop thread touches it
  // runner_ was ended, and the loop stopped before it had stopped; only the
  // loop thread, then Leave and Shutdown once it is joined.
  bool runner_ended_ = false;
  // The coordinator has heard runner_'s end: a sync succeeded whose report
  // was taken once it was done. Only the loop thread, then Leave.
  bool end_reported_ = false;
  // The checkpoint copy directory of each job (by JobKey) this agent has run
  // or found claimed for its coordinator, until it is removed; only the
  // loop thread touches it. Only those: agents of other clusters may share
  // the directory.
  std::map<std::string, std::string> copies_;
  bool found_claimed_copies_ = false;  // only the loop thread
  std::string cluster_uid_;            // the last sync's; only the loop thread
  absl::Time next_library_sweep_;  // only the loop thread
};

}  // namespace cohort::agent
