#pragma once

// The agent's calls to the coordinator's JobControl service, behind an
// interface so that the job loops can be tested against a fake coordinator.
// Implementations are thread-safe: the job loop and every closure executor
// share one.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cohort/v1/job.pb.h"
#include "rpc/security.h"

namespace cohort::agent {

class JobControlClient {
 public:
  virtual ~JobControlClient() = default;

  // Reports this agent's job; returns the assignment it should run.
  virtual absl::StatusOr<v1::AgentSyncResponse> Sync(
      const v1::AgentJobReport& report, absl::Duration timeout) = 0;
  // The step library with `digest`, as bytes (not yet checked).
  virtual absl::StatusOr<std::string> FetchLibrary(const std::string& digest,
                                                   absl::Duration timeout) = 0;
  // ParameterServer jobs: one closure exchange.
  virtual absl::StatusOr<v1::ClosureResponse> RunClosures(
      const v1::ClosureRequest& request, absl::Duration timeout) = 0;
};

// Over gRPC to `address`. Errors name the method and the address:
// "JobControl.Sync to 10.0.0.1:7070: UNAVAILABLE: ...".
std::shared_ptr<JobControlClient> NewGrpcJobControlClient(
    const std::string& address, const rpc::Security& security);

}  // namespace cohort::agent
