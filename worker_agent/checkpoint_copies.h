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

namespace cohort::agent {

// "<job id>-<job uid>", as the coordinator lists unended jobs: keyed by the
// uid too, since another cluster's job may have had the same id.
std::string JobKey(const std::string& job_id, const std::string& job_uid);

// <root>/<JobKey>.
std::string CheckpointCopyDir(const std::string& root,
                              const std::string& job_id,
                              const std::string& job_uid);

// Marks `dir` (made if needed) as a copy kept for the coordinator at
// `owner`, in a file of its own that checkpoints never touch: after a
// restart the agent finds its copies again, including those of jobs that
// ended while it was down, and leaves alone the copies of other clusters'
// agents sharing the root.
absl::Status ClaimCheckpointCopy(const std::string& dir,
                                 const std::string& owner);

// The copies under `root` claimed for `owner`: directory by JobKey. Those
// of other owners and unclaimed ones are not listed.
std::map<std::string, std::string> ClaimedCheckpointCopies(
    const std::string& root, const std::string& owner);

// Removes `dir` and everything in it. Returns the bytes it held, or nullopt
// when there was no such directory or it could not be removed (logged).
std::optional<uint64_t> RemoveCheckpointCopy(const std::string& dir);

}  // namespace cohort::agent
