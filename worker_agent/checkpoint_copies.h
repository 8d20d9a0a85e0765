#pragma once

// An agent's own copies of its jobs' checkpoints, one directory per job
// under a root, so that a job survives the loss of any one host without a
// shared filesystem. A job restores from them only while it has not ended;
// JobAgent removes them once the coordinator stops listing the job.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "cohort/v1/job.pb.h"

namespace cohort::agent {

// "<job id>-<job uid>", as the coordinator lists unended jobs: keyed by the
// uid too, since another cluster's job may have had the same id.
std::string JobKey(const std::string& job_id, const std::string& job_uid);

// Where the agent of `assignment` keeps its copy, <root>/<JobKey>, or "" when
// it keeps none: the chief's agent (node 0) writes the job's own
// checkpoint_dir, and an empty root means no copies.
std::string CheckpointCopyDirFor(const std::string& root,
                                 const v1::AgentJobAssignment& assignment);

// Marks `dir` (made if needed) as a copy kept for the cluster `cluster_uid`
// (AgentSyncResponse.cluster_uid), in a file of its own that checkpoints
// never touch: after a restart the agent finds its copies again, those of
// jobs that ended while it was down included, and leaves alone the copies
// of other clusters' agents sharing the root.
absl::Status ClaimCheckpointCopy(const std::string& dir,
                                 const std::string& cluster_uid);

// The copies under `root` claimed for `cluster_uid`: directory by JobKey.
// Those of other clusters and unclaimed ones are not listed.
std::map<std::string, std::string> ClaimedCheckpointCopies(
    const std::string& root, const std::string& cluster_uid);

// Removes `dir` and everything in it, its claim last, so that a copy only
// partly removed is still found and tried again. Returns the bytes it held, or
// nullopt when there was no such directory or it could not be removed (logged).
std::optional<uint64_t> RemoveCheckpointCopy(const std::string& dir);

}  // namespace cohort::agent
