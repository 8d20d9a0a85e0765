#pragma once

// What every AttemptRunner shares: the attempt's thread, its state (LOADING,
// RUNNING, then FINISHED or FAILED) and its first error, and the part of
// the report they make.

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "cohort/v1/job.pb.h"

namespace cohort::agent {

// Thread-safe. The owner aborts its own work, then calls Join() before
// destroying it (a runner's destructor does both).
class AttemptLifecycle {
 public:
  explicit AttemptLifecycle(const v1::AgentJobAssignment* assignment)
      : assignment_(assignment) {}  // not owned; outlives this
  ~AttemptLifecycle() { Join(); }

  // Runs `body` on the attempt's thread. When it returns, the attempt is
  // FINISHED if `body` returned true and no error was recorded, else FAILED.
  void Start(std::function<bool()> body);
  // Waits for the attempt's thread. Idempotent.
  void Join();

  // LOADING becomes RUNNING; any other state stays.
  void SetRunning();
  // Records the attempt's first error; false when one was recorded before.
  // `permanent`: retrying the attempt cannot help. `agent_left`: it ended
  // because an agent is stopping, after every replica checkpointed.
  bool RecordError(const absl::Status& status, bool permanent,
                   bool agent_left = false);
  // The attempt was stopped from outside (the coordinator ended it, the
  // agent is stopping): once its body returns, it is FAILED, with the first
  // error recorded by then or else with `why`. A body cut short returns as
  // if done, and must not be reported FINISHED; an error of its own, such as
  // the collective that named a lost peer, says more than `why`.
  void Abort(const absl::Status& why);
  absl::Status error() const;
  bool done() const;

  // The report's job, attempt, group, state, and error if any.
  v1::AgentJobReport Report() const;

 private:
  const v1::AgentJobAssignment* const assignment_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  v1::AgentJobReport::State state_ ABSL_GUARDED_BY(mu_) =
      v1::AgentJobReport::LOADING;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);  // the first Abort's reason
  bool permanent_ ABSL_GUARDED_BY(mu_) = false;
  bool agent_left_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cohort::agent
