#pragma once

// Starting a new cluster in a state dir that holds an earlier one
// (--new_cluster, what `cohortctl up` does unless asked to resume): the
// earlier cluster's tasks that still run are stopped, so that none is left
// behind as an orphan, and its state is moved to <state_dir>/previous, so
// that nothing of it is lost but none of it is resumed either. The one
// before moves to previous.1, and so on: the last three are kept.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/state_store.h"

namespace cohort::coordinator {

// FAILED_PRECONDITION, naming the address, when the earlier coordinator
// still serves there: its cluster is alive and is not ours to stop.
// Otherwise stops each launched task of `saved` whose process still runs
// that task for that coordinator (SIGTERM, then SIGKILL after `grace`),
// and moves the state files aside. Blocking; runs before serving.
absl::Status SetAsidePreviousCluster(const std::string& state_dir,
                                     const PersistedState& saved,
                                     absl::Duration grace);

// One line per job of a saved job table (jobs.json) that had not ended,
// "job 2 (JOB_RUNNING, step 670431 of 2000000)": what setting the cluster
// aside also sets aside, for the operator to hear of. Empty for a table
// that cannot be read.
std::vector<std::string> UnfinishedJobs(const std::string& jobs_json);

}  // namespace cohort::coordinator
