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
// attempt, restarts, error, what a waiting attempt waits for, replicas, the
// communication chosen, events, metrics or evaluations (steps/s alone moves
// on every report, and is not news).
inline bool JobStatusChanged(const v1::JobStatus& before,
                             const v1::JobStatus& now) {
  if (before.state() != now.state() || before.step() != now.step() ||
      before.attempt() != now.attempt() ||
      before.restarts_size() != now.restarts_size() ||
      before.error() != now.error() ||
      before.waiting_for() != now.waiting_for() ||
      before.num_replicas() != now.num_replicas() ||
      before.communication_note() != now.communication_note() ||
      before.evaluations_size() != now.evaluations_size() ||
      before.metrics_size() != now.metrics_size()) {
    return true;
  }
  // Events are capped, so their count may stay put: the newest tells.
  if (before.events_size() != now.events_size()) return true;
  if (now.events_size() > 0) {
    const v1::JobEvent& a = before.events(before.events_size() - 1);
    const v1::JobEvent& b = now.events(now.events_size() - 1);
    if (a.time_unix_ms() != b.time_unix_ms() || a.text() != b.text()) {
      return true;
    }
  }
  for (const auto& [name, value] : before.metrics()) {
    auto it = now.metrics().find(name);
    if (it == now.metrics().end() || it->second != value) return true;
  }
  return false;
}

}  // namespace cohort
