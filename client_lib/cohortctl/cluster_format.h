#pragma once

// How cohortctl shows a ClusterState: a table for people, JSON for programs.

#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cohort/v1/coordinator.pb.h"
#include "nlohmann/json.hpp"

namespace cohort::ctl {

// Stable JSON schema: numbers as numbers, states as names.
nlohmann::json ClusterStateToJson(const v1::ClusterState& state);

// A header with the coordinator's facts, then one row per task, then, when
// the cluster has ps tasks, one row per shard: its job, variables, updates
// and last snapshot (its age as of `now`).
std::string ClusterStateToTable(const v1::ClusterState& state,
                                absl::Time now = absl::Now());

}  // namespace cohort::ctl
