#pragma once

// Predicates over the job states of cohort/v1/job.proto, shared by the
// coordinator, the client library and cohortctl.

#include "cohort/v1/job.pb.h"

namespace cohort {

// Whether a job in `state` has ended: SUCCEEDED, FAILED or CANCELLED.
inline bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_SUCCEEDED || state == v1::JOB_FAILED ||
         state == v1::JOB_CANCELLED;
}

// Whether `now` tells a watcher something `before` did not: state, step,
// attempt, restarts, error, metrics or evaluations (steps/s alone moves on
// every report, and is not news).
inline bool JobStatusChanged(const v1::JobStatus& before,
                             const v1::JobStatus& now) {
  if (before.state() != now.state() || before.step() != now.step() ||
      before.attempt() != now.attempt() ||
      before.restarts_size() != now.restarts_size() ||
      before.error() != now.error() ||
      before.evaluations_size() != now.evaluations_size() ||
      before.metrics_size() != now.metrics_size()) {
    return true;
  }
  for (const auto& [name, value] : before.metrics()) {
    auto it = now.metrics().find(name);
    if (it == now.metrics().end() || it->second != value) return true;
  }
  return false;
}

}  // namespace cohort
