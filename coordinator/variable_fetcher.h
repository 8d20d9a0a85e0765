#pragma once

// Jobs.FetchVariables: reads a ParameterServer job's variables from its ps
// tasks. Each shard lists the parts it holds (ParameterServer.ListVariables)
// and streams their values (Pull); a variable the partitioner split is put
// back together from its "<name>/part_<i>" parts, which cut it along axis 0.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cohort/v1/job.pb.h"
#include "cohort/v1/ps.pb.h"
#include "rpc/security.h"

namespace cohort::coordinator {

// One stored part, as a shard listed and returned it.
struct StoredPart {
  v1::PsVariableSpec spec;
  std::string value;
  int64_t updates = 0;
  int shard = 0;  // which listed it
};

// Joins `parts` (from every shard, in any order) into whole variables, by
// name, keeping those in `names` (empty: all). INVALID_ARGUMENT naming a
// wanted variable no shard holds; DATA_LOSS when a variable's parts do not
// fit together (a part missing, shapes or types that differ).
absl::StatusOr<std::vector<v1::VariableValue>> JoinParts(
    std::vector<StoredPart> parts, const std::vector<std::string>& names);

// Lists every shard at `ps_addresses` (index = shard id), then pulls the
// parts of the variables in `names` (empty: all), one shard after another,
// all of it within `timeout`. `job_uid` (JobStatus.uid) tells the job from
// an earlier cluster's job of the same id that a shard may still hold.
// RESOURCE_EXHAUSTED, before anything is pulled, when those hold more than
// max_bytes. Errors name the shard: UNAVAILABLE for one that does not answer,
// FAILED_PRECONDITION when a shard holds another job's variables now, DATA_LOSS
// for a value that does not fit its spec. Blocks: run it off the gRPC threads.
absl::StatusOr<std::vector<v1::VariableValue>> FetchPsVariables(
    const std::vector<std::string>& ps_addresses, const rpc::Security& security,
    const std::string& job_id, const std::string& job_uid,
    const std::vector<std::string>& names, absl::Duration timeout,
    int64_t max_bytes);

}  // namespace cohort::coordinator
