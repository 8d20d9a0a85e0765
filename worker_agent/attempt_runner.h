#pragma once

// What the agent's job loop drives: one attempt of a job on this agent.
// SyncJobRunner runs the synchronous strategies; PsJobRunner runs
// ParameterServer closure executors.

#include "absl/status/status.h"
#include "cohort/v1/job.pb.h"

namespace cohort::agent {

// Implementations own their threads between Start() and destruction (which
// aborts and joins). Report(), Abort() and done() are thread-safe.
class AttemptRunner {
 public:
  virtual ~AttemptRunner() = default;
  virtual const v1::AgentJobAssignment& assignment() const = 0;
  virtual void Start() = 0;
  // Ends the attempt: waits fail with `status`, work stops at its next
  // step.
  virtual void Abort(const absl::Status& status) = 0;
  virtual v1::AgentJobReport Report() const = 0;
  virtual bool done() const = 0;
};

// Peers or servers that vanish or abort make a retryable failure; anything
// else (mismatched collectives, bad arguments, a step's own error) is the
// job's own.
inline bool IsPeerFailure(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

}  // namespace cohort::agent
