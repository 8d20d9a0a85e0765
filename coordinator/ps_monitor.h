#pragma once

// Watches the current attempt of a ParameterServer job, as TF's
// ClusterCoordinator does: a lost worker's closures are re-queued and the
// job goes on while one worker lives; a ps task that goes away is waited
// for (the supervisor restarts it and it restores its snapshot) up to the
// job's recovery timeout. Functions of a Job, called under the JobManager's
// mutex; they set job.changed when they record something worth saving.

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/job.h"
#include "coordinator/placement.h"

namespace cohort::coordinator {

// The collective group of `task`'s runner in the current attempt; a new
// epoch (the worker was lost) makes it a new group.
std::string PsGroup(const Job& job, const std::string& task);

// Appends a line to the job's events, keeping the newest ones.
void AddEvent(Job& job, std::string text, absl::Time now);

// `task`'s closures in flight run again elsewhere, and its assignment gets
// a new group so that the agent starts a fresh runner when it is back.
void LoseWorker(Job& job, const std::string& task, const std::string& why,
                absl::Time now);

// Puts a worker's `executors` on its `devices` devices, round-robin; a
// worker not yet seen counts as one device.
void SetPsDevices(v1::AgentJobAssignment& assignment, int executors,
                  int devices);

// A worker's account of a ps task that restored its snapshot: records how
// many acknowledged updates it lost, once per incarnation.
void RecordRecovery(Job& job, const v1::PsRecovery& recovery, absl::Time now);

struct PsVerdict {
  enum class Kind { kGoesOn, kSucceeded, kFailed };
  Kind kind = Kind::kGoesOn;
  std::string error;  // kFailed
};

// One tick: loses workers that died or failed, fails a job whose worker
// keeps failing or whose ps task stays away too long, or that has had no
// worker for `placement_timeout`.
PsVerdict CheckPsAttempt(Job& job, const std::vector<TaskId>& ps_tasks,
                         const std::vector<AgentView>& agents, absl::Time now,
                         absl::Duration placement_timeout);

}  // namespace cohort::coordinator
