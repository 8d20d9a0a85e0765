#pragma once

// Which tasks a job runs on, from its status: what the coordinator reads a
// job's logs and traces from.

#include <vector>

#include "cohort/v1/job.pb.h"
#include "common/cluster_spec.h"

namespace cohort::coordinator {

// The agents of the job's placement ("chief:0 (2 replicas)"), in rank
// order, then the ps tasks of a ParameterServer job when `with_ps`. Before
// the job is placed: every chief and worker of `spec`, which it may run on.
// Only tasks of `spec`: a job placed before the coordinator restarted with
// a smaller spec may name others, which have no address to ask.
std::vector<TaskId> JobTasks(const v1::JobStatus& job, const ClusterSpec& spec,
                             bool with_ps);

}  // namespace cohort::coordinator
