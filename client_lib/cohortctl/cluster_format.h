#pragma once

// How cohortctl shows a ClusterState: a table for people, JSON for programs.

#include <string>

#include "cohort/v1/coordinator.pb.h"
#include "nlohmann/json.hpp"

namespace cohort::ctl {

// Stable JSON schema: numbers as numbers, states as names.
nlohmann::json ClusterStateToJson(const v1::ClusterState& state);

// A header with the coordinator's facts, then one row per task.
std::string ClusterStateToTable(const v1::ClusterState& state);

}  // namespace cohort::ctl
