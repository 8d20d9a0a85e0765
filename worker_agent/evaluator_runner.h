#pragma once

// The evaluator task's runner: TF's sidecar evaluator. It watches the job's
// checkpoint directory; for each new checkpoint it builds one replica on
// the agent's first device (a group of one), runs the init function,
// restores the checkpoint, and runs the job's eval function over
// eval_steps batches of its eval dataset (one pass when eval_steps is 0,
// the last batch cut short). Each metric's mean over the examples (a
// batch's value weighs as many examples as it holds), tagged with the
// checkpoint's step, goes into the agent's report. It is no part of the job's
// sync group: training never waits for it, and losing it fails nothing.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "worker_agent/attempt_lifecycle.h"
#include "worker_agent/attempt_runner.h"
#include "worker_agent/input_pipeline.h"
#include "worker_agent/replica_context.h"
#include "worker_agent/step_library.h"

namespace cohort::agent {

// Owns its thread between Start() and destruction. Report() and Abort()
// are thread-safe.
class EvaluatorRunner final : public AttemptRunner {
 public:
  // How often the checkpoint directory is looked at.
  static constexpr absl::Duration kPollInterval = absl::Milliseconds(200);
  // The evaluations a report carries, newest last.
  static constexpr int kReportedEvaluations = 50;

  explicit EvaluatorRunner(RunnerOptions options);
  ~EvaluatorRunner() override;

  const v1::AgentJobAssignment& assignment() const override {
    return options_.assignment;
  }
  void Start() override;
  void Abort(const absl::Status& status) override;
  v1::AgentJobReport Report() const override;
  bool done() const override { return lifecycle_.done(); }

 private:
  bool Run();
  // Evaluates the newest checkpoint (at least `step`).
  v1::Evaluation Evaluate(int64_t step);
  absl::StatusOr<std::map<std::string, double>> EvaluateOnce(
      const Device& device, int64_t* restored);

  const RunnerOptions options_;
  JobInfo job_;
  StepFunctions functions_;
  std::unique_ptr<InputPipeline> pipeline_;
  int64_t eval_steps_ = 0;
  AttemptLifecycle lifecycle_{&options_.assignment};
  absl::Notification stop_;

  mutable absl::Mutex mu_;
  std::vector<v1::Evaluation> evaluations_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::agent
