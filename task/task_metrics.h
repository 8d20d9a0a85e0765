#pragma once

// What a task daemon's /metrics says about itself, read from the same report
// it heartbeats to the coordinator: a parameter server's updates, variables
// and snapshot age.

#include "absl/time/time.h"
#include "cohort/v1/cluster.pb.h"
#include "common/metrics.h"

namespace cohort::task {

// Writes the metrics of `report` as of `now`. Pure; thread-compatible.
void WriteReportMetrics(const v1::TaskReport& report, absl::Time now,
                        MetricWriter& out);

}  // namespace cohort::task
