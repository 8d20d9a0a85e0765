#pragma once

// One attempt of a synchronous job (MultiWorkerMirrored, Mirrored,
// OneDevice, CentralStorage) on one agent; ParameterServer jobs have
// PsJobRunner. Loads the step library, builds the input pipeline and one
// replica per assigned device, each on its own thread with its own
// communicator, and runs the step loop. The chief's replica 0 writes
// checkpoints.
//
// A failing replica aborts the others' communicators, and those of the
// other agents through the collective layer, so that no replica waits for
// one that will not come.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cohort/v1/job.pb.h"
#include "collective/communicator.h"
#include "collective/grpc_store.h"
#include "collective/transports/local_transport.h"
#include "common/cluster_spec.h"
#include "rpc/security.h"
#include "worker_agent/attempt_lifecycle.h"
#include "worker_agent/attempt_runner.h"
#include "worker_agent/replica_context.h"
#include "worker_agent/step_input.h"
#include "worker_agent/step_library.h"

namespace cohort::collective {
class GrpcTransport;
}  // namespace cohort::collective

namespace cohort::agent {

// Owns its threads between Start() and destruction. Report(), Abort() and
// Leave() are thread-safe.
class SyncJobRunner final : public AttemptRunner {
 public:
  explicit SyncJobRunner(RunnerOptions options);
  // Aborts if still running, and joins.
  ~SyncJobRunner() override;

  const v1::AgentJobAssignment& assignment() const override {
    return options_.assignment;
  }

  void Start() override;
  // Communicators fail with `status`, replicas stop at their next step or
  // collective.
  void Abort(const absl::Status& status) override;
  v1::AgentJobReport Report() const override;
  bool done() const override;
  // Every replica checkpoints at the end of the step under way and the
  // attempt fails as retryable, naming the leaving replica.
  bool Leave() override {
    leaving_ = true;
    return true;
  }

 private:
  // The attempt's thread; true when every local replica finished.
  bool Run();
  // Makes the checkpoint directory (the job's on the chief, a local copy on
  // the others) and checks that it takes files; errors keep errno's code.
  absl::Status CheckCheckpointDir();
  absl::Status Prepare();
  void RunReplica(int local);
  // `device` is the replica's, with its stream.
  absl::StatusOr<std::unique_ptr<collective::Communicator>> Connect(
      int local, const Device& device);
  // Records the link from rank `from` to the next of the ring [begin, end),
  // and where its bytes go when it crosses a socket.
  void AddLink(const std::string& ring, int from, int end,
               const std::string& transport, int begin = 0,
               const std::string& to_address = "");
  // The same for the link of `transport`'s ring [0, end).
  void AddLink(const std::string& ring, int from, int end,
               const collective::GrpcTransport& transport);
  // Records the first failure and aborts everything else (see
  // AttemptLifecycle::RecordError).
  void Fail(const absl::Status& status, bool permanent,
            bool agent_left = false);
  void Progress(int local, int64_t steps_done);
  // The fewest steps any local replica has done; 0 when there are none.
  int64_t SlowestReplicaStep() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The replicas agreed to stop after `done` steps.
  void Stopped(int64_t done, const StepEnd& end);

  const RunnerOptions options_;
  JobInfo job_;
  StepFunctions functions_;
  std::unique_ptr<StepInput> input_;  // null without a dataset_fn
  CentralStorage central_;            // used by CENTRAL_STORAGE jobs only
  std::unique_ptr<collective::GrpcStore> store_;  // set once, in Run
  std::unique_ptr<collective::LocalHub> hub_;     // hierarchical: this agent's
  std::vector<std::unique_ptr<collective::Communicator>> comm_owners_;
  std::vector<std::unique_ptr<ReplicaContextImpl>> replicas_;
  AttemptLifecycle lifecycle_{&options_.assignment};
  std::atomic<bool> aborted_{false};
  std::atomic<bool> leaving_{false};

  mutable absl::Mutex mu_;
  std::vector<int64_t> steps_done_ ABSL_GUARDED_BY(mu_);
  int64_t checkpoint_step_ ABSL_GUARDED_BY(mu_) = 0;
  // For steps/s: the step count and time of the last rate sample.
  int64_t rate_steps_ ABSL_GUARDED_BY(mu_) = -1;
  absl::Time rate_time_ ABSL_GUARDED_BY(mu_);
  double steps_per_second_ ABSL_GUARDED_BY(mu_) = 0;
  // Communicators in use, to abort them from another thread.
  std::vector<collective::Communicator*> comms_ ABSL_GUARDED_BY(mu_);
  // The checkpoint the attempt restored (step 0: none), and whose copy it
  // was when it was this agent's.
  int64_t resumed_from_step_ ABSL_GUARDED_BY(mu_) = 0;
  std::string resumed_from_ ABSL_GUARDED_BY(mu_);
  // The ring links starting at this agent's ranks, for the report.
  std::vector<v1::RingLink> links_ ABSL_GUARDED_BY(mu_);
  // Where and why training stopped before the job's steps; 0: it did not.
  int64_t stopped_at_step_ ABSL_GUARDED_BY(mu_) = 0;
  std::string stop_reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::agent
