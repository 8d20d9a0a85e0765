#pragma once

// Launches the cluster's local tasks as child processes and keeps them alive:
// a child that exits is marked DEAD, then relaunched after a backoff (1 s,
// doubling, capped), which counts as a restart. A launched task that stops
// heartbeating is killed so that it restarts. With no children at all (the
// --launch=none mode) it still drives the heartbeat sweep.
//
// Tasks left running by an earlier coordinator of the same state dir are
// adopted by pid instead of launched twice.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/signals.h"
#include "common/subprocess.h"
#include "coordinator/cluster_manager.h"
#include "coordinator/state_store.h"

namespace cohort::coordinator {

struct SupervisorOptions {
  bool restart = true;
  absl::Duration backoff_initial = absl::Seconds(1);
  absl::Duration backoff_max = absl::Seconds(30);
  // A child that lived this long before exiting starts its backoff afresh.
  absl::Duration healthy_run = absl::Seconds(30);
  // SIGTERM to SIGKILL on shutdown: long enough for an agent to checkpoint
  // the step under way (see kDefaultStopGrace).
  absl::Duration stop_grace = kDefaultStopGrace;
  absl::Duration poll_interval = absl::Milliseconds(100);
};

// How to start one task.
struct LaunchPlan {
  TaskId task;
  SpawnOptions spawn;
};

// Owns the children and one monitor thread between Start() and Shutdown().
// `manager` is not owned and must outlive this. Thread-safe.
//
// The children belong to one thread at a time: the caller until Start(),
// the monitor until Shutdown() joins it, then Shutdown(). So spawning,
// reaping and waiting happen without any lock held; Tasks() reads a copy
// published under the lock after each change.
class Supervisor {
 public:
  Supervisor(ClusterManager* manager, SupervisorOptions options);
  ~Supervisor();

  // Before Start(): a task to launch, or to adopt when `adopt_pid` still
  // runs it.
  void Add(LaunchPlan plan, int64_t adopt_pid = 0);
  // Called (on the monitor thread, without locks held) after any launch or
  // exit, so that the owner can persist pids and restart counts. False: it
  // could not (a full disk, say); it is called again every poll interval
  // until it can, so that a later coordinator still adopts the children.
  void set_on_change(std::function<bool()> on_change);

  void Start();
  // Stops the monitor, sends SIGTERM to every child, SIGKILL after the grace
  // period, and reaps them. Idempotent.
  void Shutdown();

  // The pid of each task it supervises (0 while none runs).
  std::vector<PersistedTask> Tasks() const;

 private:
  struct Child {
    LaunchPlan plan;
    std::optional<Subprocess> process;
    int64_t adopted_pid = 0;  // a process we did not spawn
    absl::Time launched_at;
    // Where this run's output begins in its log file (runs append to it).
    int64_t log_start = 0;
    int consecutive_failures = 0;
    std::optional<absl::Time> restart_at;
  };

  void Run();
  // One pass of the monitor; returns true when something changed.
  bool Tick(absl::Time now);
  void Launch(Child& child, bool is_restart, absl::Time now);
  // After a failed launch or an exit: relaunch after the backoff, which
  // doubles with each failure in a row (unless restarts are off).
  void ScheduleRestart(Child& child, const std::string& reason, absl::Time now);
  static int64_t Pid(const Child& child);
  // Publishes the children's pids for Tasks().
  void Publish();

  ClusterManager* const manager_;
  const SupervisorOptions options_;

  std::map<TaskId, Child> children_;  // see the class comment

  mutable absl::Mutex mu_;
  std::vector<PersistedTask> published_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::function<bool()> on_change_;
  bool change_unrecorded_ = false;  // the monitor thread's
  std::thread thread_;
};

}  // namespace cohort::coordinator
