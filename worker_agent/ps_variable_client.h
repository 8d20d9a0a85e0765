#pragma once

// The VariableClient of a ParameterServer worker: places the job's
// variables over the ps tasks with the job's partitioner, and pulls and
// pushes them through a ps::PsClient, which rides over ps restarts.

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "cohort/v1/job.pb.h"
#include "ps_client/partitioner.h"
#include "ps_client/ps_client.h"
#include "rpc/security.h"
#include "worker_agent/variable_client.h"

namespace cohort::agent {

// Thread-safe.
class PsVariableClient final : public VariableClient {
 public:
  // INVALID_ARGUMENT for an assignment without ps addresses or with bad
  // partitioner options.
  static absl::StatusOr<std::unique_ptr<PsVariableClient>> Create(
      const v1::AgentJobAssignment& assignment, const rpc::Security& security,
      const std::string& worker);

  // The first call declares; later calls must declare the same variables
  // and do nothing more.
  absl::Status Create(const std::vector<ServerVariable>& variables) override;
  absl::Status Pull(const std::vector<HostSlice>& slices) override;
  absl::Status Push(const std::vector<HostSlice>& slices) override;

  // The ps restarts the client saw since the last call.
  std::vector<v1::PsRecovery> TakeRecoveries();
  // Ends waits for unavailable ps tasks; calls that fail from then on fail
  // with `status`, the reason, not as a client that was shut down.
  void Abort(const absl::Status& status);

 private:
  PsVariableClient(std::unique_ptr<ps::PsClient> client,
                   ps::PartitionerOptions partitioner, int num_ps);

  // `failed`, or the abort's reason once there is one.
  absl::Status Failure(absl::Status failed) const;

  const std::unique_ptr<ps::PsClient> client_;
  const ps::PartitionerOptions partitioner_;
  const int num_ps_;
  absl::Mutex mu_;  // held across Create's call: not by Abort
  std::vector<std::string> declared_ ABSL_GUARDED_BY(mu_);  // names
  mutable absl::Mutex abort_mu_;
  absl::Status aborted_ ABSL_GUARDED_BY(abort_mu_);
};

}  // namespace cohort::agent
