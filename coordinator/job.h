#pragma once

// One job in the coordinator's table: its status, which is what is saved
// and shown, and the live state of its current attempt, which a restored
// coordinator rebuilds. Owned by the JobManager and guarded by its mutex;
// the monitors (sync_monitor.h, ps_monitor.h) read and update it under
// that mutex.

#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "cohort/v1/job.pb.h"
#include "coordinator/closure_scheduler.h"
#include "proto/job_state.h"

namespace cohort::coordinator {

struct JobManagerOptions {
  // After the first failure report of an attempt, how long to wait for the
  // rest (a dead task's exit, a permanent error) before deciding the cause.
  absl::Duration failure_grace = absl::Milliseconds(700);
  // A job whose agents are not all READY this long after placing began
  // fails, naming them; a job's spec may set its own (PlacementTimeout).
  absl::Duration placement_timeout = absl::Seconds(120);
  absl::Duration sync_interval = absl::Milliseconds(200);  // told to agents
  // Where checkpoints go when the spec names no directory: <root>/<job id>.
  std::string checkpoint_root;
  // The table keeps this many ended jobs, the newest; older ones are
  // dropped, so that a long-lived coordinator's table and state file stay
  // bounded. Their checkpoints stay where they are.
  int finished_jobs_kept = 1000;
  // A submission beyond this many jobs not yet ended is refused: each is in
  // every save of the table and in every agent's sync.
  int unended_jobs_max = 1000;
  // Told to agents (AgentSyncResponse.cluster_uid).
  std::string cluster_uid;
  // A table larger than this (its jobs serialized) is not saved: the save
  // fails, and so does the submission that grew it, while the file keeps
  // the last table saved. Protobuf cannot print a message of 2 GiB or more.
  int64_t max_table_bytes = std::numeric_limits<int32_t>::max() - (1 << 20);
};

struct Job {
  v1::JobStatus status;
  // Something worth saving changed; the manager collects and clears it.
  bool changed = false;
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
  // Agents' warnings (AgentJobReport.warnings) already made job events.
  std::set<std::string> warnings;

  // --- ParameterServer jobs.
  std::unique_ptr<ClosureScheduler> closures;
  std::map<std::string, int> epochs;  // per worker: bumped when it is lost
  std::set<std::string> lost;         // workers whose closures re-queued
  std::map<std::string, absl::Time> ps_down_since;
  // Per worker: runner failures since it last finished a closure.
  std::map<std::string, int> failures_in_a_row;
  // Per (ps index, incarnation): the event's index in status.events (-1:
  // none, after a coordinator restart), the updates its snapshot held, and
  // the most any worker saw acknowledged. Kept in status.ps_recoveries.
  struct Recovery {
    int event = 0;
    int64_t restored = 0;
    int64_t seen = 0;
  };
  std::map<std::pair<int, uint64_t>, Recovery> recoveries;
  // schedule_from_client jobs: the client's last call (or the job's
  // submission, or this coordinator's start).
  absl::Time client_seen = absl::InfinitePast();

  // Placed or running: neither queued nor ended.
  bool active() const {
    return !IsTerminal(status.state()) && status.state() != v1::JOB_SUBMITTED;
  }
  bool parameter_server() const {
    return status.spec().strategy() == v1::PARAMETER_SERVER;
  }
};

// The job's own placement timeout, or the manager's default.
inline absl::Duration PlacementTimeout(const Job& job,
                                       const JobManagerOptions& options) {
  const int64_t ms = job.status.spec().placement_timeout_ms();
  return ms > 0 ? absl::Milliseconds(ms) : options.placement_timeout;
}

}  // namespace cohort::coordinator
