#pragma once

// Watches the current attempt of a synchronous job (MultiWorkerMirrored,
// Mirrored, CentralStorage, OneDevice): from its agents' reports and the
// tasks' states, decides whether it is starting, running, done, or failing
// and why. A pure function; the JobManager acts on the verdict.

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/job.h"
#include "coordinator/placement.h"

namespace cohort::coordinator {

struct SyncVerdict {
  enum class Kind {
    kStarting,   // not every agent runs yet; wait
    kRunning,    // every agent runs or has finished
    kSucceeded,  // every agent finished
    kFailing,    // a failure was seen; its cause is still being decided
    kEnd,        // the attempt is over: `cause`, and whether `permanent`
  };
  Kind kind = Kind::kStarting;
  // A task of the attempt is gone: why, for the survivors to abort with.
  std::string abort;
  std::string cause;
  bool permanent = false;  // the job caused it: no restart helps
  // An agent was stopped after every replica checkpointed, and nothing else
  // failed: an operator's stop, so the restart is not counted against
  // max_restarts.
  bool agent_left = false;
};

// A failure is decided at once when permanent, otherwise once
// `options.failure_grace` has passed since job.failing_since (or since
// `now`, when this is the first failure seen), so that a dead task's exit
// is named rather than the broken collective its peers saw.
SyncVerdict JudgeSyncAttempt(const Job& job,
                             const std::vector<AgentView>& agents,
                             absl::Time now, const JobManagerOptions& options);

}  // namespace cohort::coordinator
