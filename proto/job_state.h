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

}  // namespace cohort
