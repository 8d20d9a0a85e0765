#pragma once

// One closure executor of a ParameterServer job, behind
// cohort::ReplicaContext. Each executor is its own sync group of one: the
// collectives are identities, as in TF, where a ParameterServer closure's
// replica context spans only the worker's own devices. Variables live on
// the ps tasks; the executor keeps host copies that each closure refreshes
// with a pull, and apply_gradients pushes the gradients for the ps tasks to
// apply. ON_READ variables stay per executor and are pushed after each
// closure, for the ps to aggregate.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cohort/step.h"
#include "worker_agent/logical_devices.h"
#include "worker_agent/replica_context.h"
#include "worker_agent/variable_client.h"

namespace cohort::agent {

class HostVariable;
class PsOptimizerImpl;

// `job` and `server` are not owned and outlive it. Used from its
// executor's thread only.
class PsReplicaContext final : public ReplicaContext {
 public:
  PsReplicaContext(const JobInfo* job, Device device, VariableClient* server);
  ~PsReplicaContext() override;

  // --- cohort::ReplicaContext.
  int replica_id_in_sync_group() const override { return 0; }
  int num_replicas_in_sync() const override { return 1; }
  const Device& device() const override { return device_; }
  // One logical device: a closure executor runs on one device.
  int num_logical_devices() const override { return logical_.count(); }
  absl::StatusOr<Device> logical_device(int k) const override {
    return logical_.Get(k);
  }
  absl::Status run_on(
      int k, const std::function<absl::Status(const Device&)>& fn) override {
    return logical_.RunOn(k, fn);
  }
  absl::StatusOr<Tensor> allocate(int k, size_t count, DType dtype) override {
    return logical_.Allocate(k, count, dtype);
  }
  int64_t step() const override { return step_; }
  int64_t total_steps() const override { return job_->steps; }
  int64_t global_batch_size() const override { return job_->global_batch_size; }
  uint64_t seed() const override { return job_->seed; }
  const std::string& config_json() const override { return job_->config_json; }
  const std::string& task_type() const override { return job_->task_type; }
  int task_id() const override { return job_->task_id; }
  StrategyKind strategy() const override { return job_->strategy; }
  std::span<const double> args() const override { return args_; }
  absl::StatusOr<Variable*> create_variable(const VariableOptions& options,
                                            const void* initial) override;
  Variable* find_variable(std::string_view name) override;
  absl::StatusOr<Optimizer*> create_optimizer(
      const OptimizerOptions& options,
      std::vector<Variable*> variables) override;
  absl::Status read_value(Variable& variable, void* host_out) override;
  absl::Status all_reduce(ReduceOp op,
                          std::span<const Tensor> tensors) override;
  using ReplicaContext::all_reduce;
  absl::Status broadcast(Tensor tensor, int root) override;
  absl::Status all_gather(Tensor input, Tensor output) override;
  // A sync group of one: the value is its own reduction.
  absl::Status reduce(ReduceOp, std::span<double>) override {
    return absl::OkStatus();
  }
  using ReplicaContext::reduce;
  absl::StatusOr<std::string> merge_call(
      const std::function<absl::Status(const PerReplica&, std::string*)>& fn,
      std::span<const Tensor> tensors) override;
  using ReplicaContext::merge_call;
  void report(std::string_view metric, double value) override;
  void report(std::string_view metric, double value, ReduceOp) override {
    report(metric, value);
  }
  void stop_training(std::string_view reason) override;
  ReduceOp get_loss_reduction() const override { return loss_reduction_; }
  void set_user_state(std::shared_ptr<void> state) override {
    user_state_ = std::move(state);
  }
  void* user_state() const override { return user_state_.get(); }

  // --- For the runner.
  // After the init function: declares the variables to the ps tasks.
  absl::Status DeclareVariables();
  // Before a closure: its step index (or call id) and arguments, and fresh
  // values of the trained variables.
  absl::Status BeginClosure(int64_t closure, std::vector<double> args = {});
  // After it: pushes the ON_READ variables; returns what it reported, and
  // stop_training's reason, if it called it.
  absl::StatusOr<v1::ClosureResult> EndClosure();
  void set_loss_reduction(ReduceOp op) { loss_reduction_ = op; }

  // Pushes `gradients` of `variables` (apply_gradients).
  absl::Status PushGradients(const std::vector<HostVariable*>& variables,
                             std::span<const Tensor> gradients);

 private:
  const JobInfo* const job_;
  const Device device_;
  LogicalDevices logical_;
  VariableClient* const server_;
  int64_t step_ = 0;
  std::vector<double> args_;  // of the running closure
  std::vector<std::unique_ptr<HostVariable>> variables_;  // creation order
  std::vector<std::unique_ptr<PsOptimizerImpl>> optimizers_;
  std::map<std::string, double> metrics_;  // of the running closure
  std::string stop_reason_;                // of the running closure
  ReduceOp loss_reduction_ = ReduceOp::kMean;
  std::shared_ptr<void> user_state_;
};

}  // namespace cohort::agent
