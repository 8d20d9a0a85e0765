#pragma once

// A single-process stand-in for the agent's runtime, for unit tests of step
// libraries: replicas are threads on CPU devices, variables live in host
// memory, collectives really combine the replicas' values (in rank order,
// so results are deterministic), and the optimizers apply Keras' update
// formulas. Collectives check that every replica issued the same operation.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/step.h"

namespace cohort::examples::testing {

// The meeting point of a fake job's replicas: each collective is one
// Exchange. Thread-safe.
class FakeGroup {
 public:
  explicit FakeGroup(int size, absl::Duration timeout = absl::Seconds(60))
      : size_(size), timeout_(timeout), slots_(size) {}

  int size() const { return size_; }

  // Every replica passes its bytes under an operation `tag`; each gets all
  // replicas' bytes, in rank order. INTERNAL when the tags differ,
  // DEADLINE_EXCEEDED when a replica does not come, ABORTED after Abort().
  absl::StatusOr<std::vector<std::string>> Exchange(int rank,
                                                    const std::string& tag,
                                                    std::string bytes);
  // Ends every pending and later exchange with `status`.
  void Abort(const absl::Status& status);

 private:
  const int size_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  std::vector<std::pair<std::string, std::string>> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> result_ ABSL_GUARDED_BY(mu_);
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int readers_ ABSL_GUARDED_BY(mu_) = 0;  // > 0: result_ is being read
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
};

class FakeVariable;
class FakeOptimizer;

// One replica of a fake job. `group` is not owned and outlives it. Used
// from its replica's thread only, except metrics(), read after the job.
class FakeReplicaContext final : public ReplicaContext {
 public:
  struct Job {
    int64_t steps = 0;
    int64_t global_batch_size = 0;
    uint64_t seed = 0;
    std::string config_json = "{}";
  };

  FakeReplicaContext(const Job* job, int rank, FakeGroup* group);
  ~FakeReplicaContext() override;

  int replica_id_in_sync_group() const override { return rank_; }
  int num_replicas_in_sync() const override { return group_->size(); }
  const Device& device() const override { return device_; }
  // One logical device, the host: work placed on it runs inline.
  int num_logical_devices() const override { return 1; }
  absl::StatusOr<Device> logical_device(int k) const override {
    if (k != 0) return absl::OutOfRangeError("the fake has logical device 0");
    return device_;
  }
  absl::Status run_on(
      int k, const std::function<absl::Status(const Device&)>& fn) override {
    if (k != 0) return absl::OutOfRangeError("the fake has logical device 0");
    return fn(device_);
  }
  absl::StatusOr<Tensor> allocate(int k, size_t count, DType dtype) override {
    if (k != 0) return absl::OutOfRangeError("the fake has logical device 0");
    scratch_.emplace_back(count * DTypeSize(dtype), '\0');
    return Tensor{scratch_.back().data(), count, dtype};
  }
  int64_t step() const override { return step_; }
  int64_t total_steps() const override { return job_->steps; }
  int64_t global_batch_size() const override { return job_->global_batch_size; }
  uint64_t seed() const override { return job_->seed; }
  const std::string& config_json() const override { return job_->config_json; }
  const std::string& task_type() const override { return task_type_; }
  int task_id() const override { return 0; }
  StrategyKind strategy() const override {
    return StrategyKind::kMultiWorkerMirrored;
  }
  std::span<const double> args() const override { return {}; }
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
  absl::Status reduce(ReduceOp op, std::span<double> values) override;
  using ReplicaContext::reduce;
  absl::StatusOr<std::string> merge_call(
      const std::function<absl::Status(const PerReplica&, std::string*)>& fn,
      std::span<const Tensor> tensors) override;
  using ReplicaContext::merge_call;
  void report(std::string_view metric, double value) override;
  // Reduced at once, as the agent does at the step's end.
  void report(std::string_view metric, double value, ReduceOp op) override;
  void stop_training(std::string_view reason) override {
    stop_reason_ = std::string(reason);
  }
  ReduceOp get_loss_reduction() const override { return loss_reduction_; }
  void set_user_state(std::shared_ptr<void> state) override {
    user_state_ = std::move(state);
  }
  void* user_state() const override { return user_state_.get(); }

  // --- For the runner and the optimizers.
  void set_step(int64_t step) { step_ = step; }
  void set_loss_reduction(ReduceOp op) { loss_reduction_ = op; }
  // After each step: whether any replica called stop_training. Collective.
  absl::StatusOr<bool> AgreeToStop();
  // Makes every variable equal to replica 0's, as the agent does after the
  // init function when there is no checkpoint. Collective.
  absl::Status SyncVariables();
  // Every reported value, by metric, in step order: (step, value).
  const std::map<std::string, std::vector<std::pair<int64_t, double>>>&
  metrics() const {
    return metrics_;
  }
  const std::vector<std::unique_ptr<FakeVariable>>& variables() const {
    return variables_;
  }

 private:
  const Job* const job_;
  const int rank_;
  FakeGroup* const group_;
  const Device device_;
  std::deque<std::string> scratch_;  // allocate()'s; deque: stable
  int64_t step_ = 0;
  const std::string task_type_ = "chief";
  ReduceOp loss_reduction_ = ReduceOp::kMean;
  std::optional<std::string> stop_reason_;
  std::vector<std::unique_ptr<FakeVariable>> variables_;
  std::vector<std::unique_ptr<FakeOptimizer>> optimizers_;
  std::map<std::string, std::vector<std::pair<int64_t, double>>> metrics_;
  std::shared_ptr<void> user_state_;
};

// A variable in host memory. Used from its replica's thread only.
class FakeVariable final : public Variable {
 public:
  explicit FakeVariable(VariableOptions options)
      : options_(std::move(options)),
        storage_((count() * DTypeSize(options_.dtype) + 7) / 8) {}

  const VariableOptions& options() const override { return options_; }
  Tensor tensor() override {
    return {storage_.data(), count(), options_.dtype};
  }
  // The values as doubles, for checks.
  std::vector<double> values();

 private:
  const VariableOptions options_;
  std::vector<uint64_t> storage_;  // 8-byte aligned, zeroed
};

}  // namespace cohort::examples::testing
