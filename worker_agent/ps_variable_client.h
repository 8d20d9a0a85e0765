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
  // Ends waits for unavailable ps tasks; later calls fail.
  void Abort(const absl::Status& status);

 private:
  PsVariableClient(std::unique_ptr<ps::PsClient> client,
                   ps::PartitionerOptions partitioner, int num_ps);

  const std::unique_ptr<ps::PsClient> client_;
  const ps::PartitionerOptions partitioner_;
  const int num_ps_;
  absl::Mutex mu_;
  std::vector<std::string> declared_ ABSL_GUARDED_BY(mu_);  // names
};

}  // namespace cohort::agent
