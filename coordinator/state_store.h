#pragma once

// What a coordinator keeps in --state_dir so that a restarted coordinator
// knows the cluster again: the spec, the address it served on, and for each
// task it launched the pid and restart count. Sessions are not kept; tasks
// re-register when the new coordinator answers their heartbeat with
// NOT_FOUND.
//
// File: <state_dir>/coordinator_state.json, replaced atomically.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cluster_spec.h"

namespace cohort::coordinator {

struct PersistedTask {
  TaskId task;
  bool launched = false;
  int64_t pid = 0;
  int restart_count = 0;
};

struct PersistedState {
  int64_t incarnation = 0;  // starts of this state dir, this one included
  // Made at the first start of the state dir (empty in files older than
  // it): names the cluster to agents (AgentSyncResponse.cluster_uid).
  std::string cluster_uid;
  std::string coordinator_address;
  std::string cluster_spec_json;
  std::vector<PersistedTask> tasks;
};

// Reads and writes the state file. Not thread-safe; one owner.
class StateStore {
 public:
  explicit StateStore(std::string dir);

  // nullopt when there is no state yet. A corrupt file is an error naming
  // it: it is never silently overwritten.
  absl::StatusOr<std::optional<PersistedState>> Load() const;
  absl::Status Save(const PersistedState& state) const;

  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

}  // namespace cohort::coordinator
