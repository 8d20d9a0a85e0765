#pragma once

// An agent's own copies of its jobs' checkpoints, one directory per job
// under a root, so that a job survives the loss of any one host without a
// shared filesystem. A job restores from them only while it has not ended;
// JobAgent removes them once the coordinator stops listing the job.

#include <cstdint>
#include <optional>
#include <string>

namespace cohort::agent {

// "<job id>-<job uid>", as the coordinator lists unended jobs: keyed by the
// uid too, since another cluster's job may have had the same id.
std::string JobKey(const std::string& job_id, const std::string& job_uid);

// <root>/<JobKey>.
std::string CheckpointCopyDir(const std::string& root,
                              const std::string& job_id,
                              const std::string& job_uid);

// Removes `dir` and everything in it. Returns the bytes it held, or nullopt
// when there was no such directory or it could not be removed (logged).
std::optional<uint64_t> RemoveCheckpointCopy(const std::string& dir);

}  // namespace cohort::agent
