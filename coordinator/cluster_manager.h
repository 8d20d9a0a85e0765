#pragma once

// The coordinator's view of the cluster: one record per task of the spec,
// its state (STARTING / READY / DEAD / RESTARTING), session, pid, restart
// count and last report. Pure logic: no threads, no RPCs, no processes; the
// caller passes the time, so tests drive it with a fake clock.
//
// State changes:
//   STARTING   --Register-->           READY
//   READY      --silent > timeout-->   DEAD   (session forgotten)
//   STARTING   --no Register within the startup timeout--> DEAD
//   any        --process exited / Deregister--> DEAD
//   DEAD       --relaunched-->         RESTARTING --Register--> READY
//   DEAD       --Register (by hand)--> READY
//
// A task nobody launched (another host's, or --launch=none) stays STARTING
// until it registers; past the startup timeout its last_error says what is
// known of why (nothing claimed it, a refused claim, a host that did not
// resolve), so that a TF_CONFIG mistake is not a silent wait.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/v1/coordinator.pb.h"
#include "common/cluster_spec.h"

namespace cohort::coordinator {

struct ClusterManagerOptions {
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  absl::Duration startup_timeout = absl::Seconds(30);
  // Told to tasks, which beat at most this far apart; shortened to a fifth
  // of heartbeat_timeout where that is less.
  absl::Duration heartbeat_interval = absl::Seconds(1);
};

// Thread-safe: every method takes the internal mutex for microseconds and
// never calls out while holding it.
class ClusterManager {
 public:
  ClusterManager(ClusterSpec spec, ClusterManagerOptions options,
                 absl::Time now);

  const ClusterSpec& spec() const { return spec_; }

  // --- Called by the Coordinator service. ---
  // INVALID_ARGUMENT when the identity or address is not in the spec;
  // ALREADY_EXISTS when another live process holds the identity, and
  // FAILED_PRECONDITION once the same claimant has been refused for twice
  // the heartbeat timeout (30 s at least): the holder is no dying process
  // but a second one given the same identity. Refusals are logged, and shown
  // as the task's last error while it is STARTING or RESTARTING.
  absl::StatusOr<v1::RegisterResponse> Register(const v1::TaskReport& report,
                                                absl::Time now);
  // NOT_FOUND when the session is unknown: the task must register again.
  // `wall`, this host's clock, is what the task's clock offset is measured
  // against (`now` when not given).
  absl::Status Heartbeat(const v1::HeartbeatRequest& request, absl::Time now,
                         std::optional<absl::Time> wall = std::nullopt);
  absl::Status Deregister(const v1::DeregisterRequest& request, absl::Time now);

  // --- Called by the supervisor. ---
  // Both leave alone a task that another live process holds (registered,
  // heartbeating, another pid): a process launched for it that exits, or
  // one launched beside it, says nothing of the holder. MarkExited returns
  // that holder's pid, else 0 (the task is DEAD now). `pid` 0: a launch
  // that failed before any process ran. The registered pid is the task's
  // process: an agent_binary that is a wrapper must exec it, or the
  // wrapper's exit is seen only as the child's silence.
  void MarkLaunched(const TaskId& task, int64_t pid, bool is_restart,
                    absl::Time now);
  int64_t MarkExited(const TaskId& task, int64_t pid, const std::string& reason,
                     absl::Time now);
  // Declares DEAD every task past its heartbeat or startup timeout, and
  // returns those that just died. Called every poll interval: a gap since
  // the last call of more than half the heartbeat timeout is a stall of the
  // coordinator's own (paused, swapping, starved), during which it heard
  // no heartbeats or registrations, and the part of it past that half does
  // not count as the tasks' silence, nor against their startup timeout.
  std::vector<TaskId> ExpireSilent(absl::Time now);
  // Records why `task`, nobody's to launch, may never register (its host
  // does not resolve here, say); shown once it is overdue.
  void NoteAbsenceHint(const TaskId& task, std::string hint);
  // Restores counts saved by an earlier coordinator of this state dir.
  void RestoreRestartCount(const TaskId& task, int restart_count);

  // --- Admin API. ---
  std::vector<v1::TaskStatus> Snapshot(absl::Time now) const;
  v1::TaskState state(const TaskId& task) const;
  int restart_count(const TaskId& task) const;
  int64_t pid(const TaskId& task) const;

 private:
  struct Claim {
    absl::Time first = absl::InfinitePast();
    absl::Time last;
  };
  struct Record {
    std::string address;  // from the spec
    v1::TaskState state = v1::STARTING;
    absl::Time state_since;
    bool launched = false;
    int64_t pid = 0;
    int restart_count = 0;
    std::string session_id;
    std::optional<absl::Time> last_heartbeat;
    int64_t clock_offset_ms = 0;  // TaskStatus's
    v1::TaskReport report;
    std::string last_error;    // what ended it: a death, an exit
    std::string id;            // "worker:1"
    std::string absence_hint;  // NoteAbsenceHint's
    // Claimants refused while another process holds the identity, by
    // "pid@hostname"; one away for a while is forgotten, and all are when
    // one registers.
    std::map<std::string, Claim> claimants;
    // The latest refused registration, shown while not READY.
    std::string refusal;
    absl::Time refused_at;
    absl::Time refusal_logged;
    absl::StatusCode refusal_logged_code = absl::StatusCode::kOk;
    bool overdue_logged = false;
  };

  // Keeps a refused registration of a known task and logs it: once a
  // minute per task, and whenever its code changes.
  void NoteRefusal(Record& record, const v1::TaskReport& report,
                   const absl::Status& refusal, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why a task nobody launched has not come, once past the startup
  // timeout; "" otherwise.
  std::string OverdueNote(const Record& record, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // TaskStatus.last_error: what ended a DEAD task; for one not yet READY,
  // a recent refused claim, else what ended it before, else OverdueNote.
  std::string WhyNotReady(const Record& record, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The record of a known task, or INVALID_ARGUMENT naming the stranger.
  absl::StatusOr<Record*> Find(const v1::TaskId& task)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetState(Record& record, v1::TaskState state, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Registered, and heard from within the heartbeat timeout.
  bool HolderAlive(const Record& record, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Held alive by a process other than `pid`.
  bool HeldByOther(const Record& record, int64_t pid, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string NewSessionId() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ClusterSpec spec_;
  const ClusterManagerOptions options_;

  mutable absl::Mutex mu_;
  std::map<TaskId, Record> tasks_ ABSL_GUARDED_BY(mu_);
  uint64_t next_session_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Time> last_sweep_ ABSL_GUARDED_BY(mu_);  // ExpireSilent
  const uint64_t session_salt_;
};

}  // namespace cohort::coordinator
