#pragma once

// For tests of the ParameterServer side of the agent: a JobControlClient
// that only exchanges closures. Sync and FetchLibrary fail as UNIMPLEMENTED;
// subclasses script RunClosures.

#include <string>

#include "worker_agent/job_control_client.h"

namespace cohort::agent {

class ClosureOnlyCoordinator : public JobControlClient {
 public:
  absl::StatusOr<v1::AgentSyncResponse> Sync(const v1::AgentJobReport&,
                                             absl::Duration) override {
    return absl::UnimplementedError("a closure-only fake has no Sync");
  }
  absl::StatusOr<std::string> FetchLibrary(const std::string&,
                                           absl::Duration) override {
    return absl::UnimplementedError("a closure-only fake has no libraries");
  }
};

}  // namespace cohort::agent
