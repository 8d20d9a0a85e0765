#pragma once

// One worker's part of a ParameterServer job: `local_replicas` closure
// executors, each a thread with its own PsReplicaContext. An executor asks
// the coordinator for a step closure, pulls the variables, runs the step
// (whose apply_gradients pushes to the ps tasks), and returns the step's
// metrics with its next request. Executors do not wait for each other:
// training is asynchronous, as TF's ParameterServerStrategy.

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "cohort/v1/job.pb.h"
#include "worker_agent/attempt_lifecycle.h"
#include "worker_agent/attempt_runner.h"
#include "worker_agent/input_pipeline.h"
#include "worker_agent/stream_pipeline.h"
#include "worker_agent/ps_replica_context.h"
#include "worker_agent/ps_variable_client.h"
#include "worker_agent/replica_context.h"
#include "worker_agent/step_library.h"

namespace cohort::agent {

// See AttemptRunner for ownership and thread safety.
class PsJobRunner final : public AttemptRunner {
 public:
  explicit PsJobRunner(RunnerOptions options);
  ~PsJobRunner() override;

  const v1::AgentJobAssignment& assignment() const override {
    return options_.assignment;
  }
  void Start() override;
  void Abort(const absl::Status& status) override;
  v1::AgentJobReport Report() const override;
  bool done() const override;

 private:
  // The attempt's thread; true when every executor ended without error.
  bool Run();
  void RunExecutor(int slot);
  // Runs one closure on `context`: a step of the job, or, when `call` is
  // set, a call the client scheduled. A step's error fails the attempt; a
  // call's own error (not a ps task's) is returned as its result's error.
  absl::StatusOr<v1::ClosureResult> RunClosure(PsReplicaContext& context,
                                               int64_t closure,
                                               const v1::ScheduledCall* call);
  // One RunClosures exchange, retried while the coordinator is away.
  absl::StatusOr<v1::ClosureResponse> Exchange(
      int slot, std::vector<v1::ClosureResult>& completed, int want);
  void Fail(const absl::Status& status, bool permanent);
  // The stream's next batch; nullopt once it has ended.
  absl::StatusOr<std::optional<Batch>> NextStreamBatch();

  const RunnerOptions options_;
  const std::string task_name_;
  JobInfo job_;
  StepFunctions functions_;
  std::unique_ptr<InputPipeline> pipeline_;
  // A stream instead: each closure takes its next batch, whichever step it
  // is, as TF's per-worker iterators do.
  absl::Mutex stream_mu_;
  std::unique_ptr<StreamPipeline> stream_ ABSL_GUARDED_BY(stream_mu_);
  // One per executor, so that the ps keys each executor's ON_READ values
  // apart. Set by Run() before the executors start, under mu_ so that
  // Abort() can reach them.
  std::vector<std::unique_ptr<PsVariableClient>> servers_;
  AttemptLifecycle lifecycle_{&options_.assignment};
  absl::Notification stop_;

  mutable absl::Mutex mu_;
  int64_t closures_done_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, double> last_metrics_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::agent
