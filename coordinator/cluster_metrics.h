#pragma once

// What the coordinator's /metrics says, read at scrape time from the task
// table and the job table (nothing is kept twice), and the target list of
// its /sd page, in the format of Prometheus' HTTP service discovery.

#include <string>
#include <vector>

#include "cohort/v1/coordinator.pb.h"
#include "cohort/v1/job.pb.h"
#include "common/metrics.h"

namespace cohort::coordinator {

// Tasks' states, heartbeat ages and restarts; jobs by state; each job's
// state, step, steps/s, restarts and reported metrics. Pure; thread-compatible.
void WriteClusterMetrics(const std::vector<v1::TaskStatus>& tasks,
                         const std::vector<v1::JobStatus>& jobs,
                         MetricWriter& out);

// [{"targets": ["host:port"], "labels": {"task": "worker:0"}}, ...]: the
// coordinator's own endpoint, then each task that serves one.
std::string ServiceDiscoveryJson(const std::string& coordinator_metrics,
                                 const std::vector<v1::TaskStatus>& tasks);

}  // namespace cohort::coordinator
