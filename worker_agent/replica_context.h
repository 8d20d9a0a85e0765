#pragma once

// The runtime behind cohort::ReplicaContext: one replica's variables,
// optimizers and collectives, on its device, over its communicator. Also
// the collective parts of a job's state: making the replicas' starting
// values equal (or restoring a checkpoint) and saving checkpoints.
//
// Variables are mirrored (one copy per replica, kept equal by identical
// updates), or, under central storage, ON_WRITE variables and optimizer
// slots exist once per agent (see central_storage.h); ON_READ variables are
// per replica either way.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/step.h"
#include "cohort/v1/job.pb.h"
#include "collective/communicator.h"
#include "common/checkpoint.h"
#include "worker_agent/central_storage.h"
#include "worker_agent/device_memory.h"
#include "worker_agent/early_stopping.h"
#include "worker_agent/logical_devices.h"

namespace cohort::agent {

// What every replica of a job knows about it. Immutable.
struct JobInfo {
  int64_t steps = 0;  // at most: stop_training or the rule may end sooner
  int64_t global_batch_size = 0;
  uint64_t seed = 0;
  std::string config_json;
  int num_replicas = 1;
  std::string checkpoint_dir;
  // The newest checkpoint the coordinator knows of: when no agent holds any
  // copy, the job fails rather than start again from step 0 (0: none).
  int64_t checkpoint_step = 0;
  absl::Duration collective_timeout = absl::Seconds(60);
  std::string task_type = "chief";  // the agent's task
  int task_id = 0;
  StrategyKind strategy = StrategyKind::kMultiWorkerMirrored;
  v1::EarlyStopping early_stopping;  // empty metric: none
};

class VariableImpl;
class OptimizerImpl;

// What the replicas agreed at the end of a step (ReplicaContextImpl::EndStep).
struct StepEnd {
  bool stop = false;
  // Why, when this replica knows: it asked, or the early-stopping rule said
  // so. Empty when another replica asked.
  std::string reason;
  int stopped_by = -1;  // the lowest replica that asked; -1: the rule
  // The lowest replica whose agent is shutting down (leave()); -1: none.
  // Every replica then checkpoints this step and ends the attempt.
  int leaving = -1;
  // Some replica asked for a checkpoint of this step (want_checkpoint()).
  bool checkpoint = false;
};

// One replica. `job`, `comm` and `central` are not owned and
// outlive it; `central` is null unless the job uses central storage, and
// then local replica 0's context outlives the others' (they alias its
// buffers). Used from its replica's thread only, except last_metrics() and
// warnings(), which are thread-safe.
class ReplicaContextImpl final : public ReplicaContext {
 public:
  // `logical_devices` are the devices the replica spans, `device` first;
  // empty: `device` alone.
  ReplicaContextImpl(const JobInfo* job, int replica_id, int local_index,
                     Device device, collective::Communicator* comm,
                     CentralStorage* central = nullptr,
                     std::vector<Device> logical_devices = {});
  ~ReplicaContextImpl() override;

  // --- cohort::ReplicaContext.
  int replica_id_in_sync_group() const override { return replica_id_; }
  int num_replicas_in_sync() const override { return job_->num_replicas; }
  const Device& device() const override { return device_; }
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
  void report(std::string_view metric, double value, ReduceOp op) override;
  void stop_training(std::string_view reason) override;
  ReduceOp get_loss_reduction() const override { return loss_reduction_; }
  void set_user_state(std::shared_ptr<void> state) override {
    user_state_ = std::move(state);
  }
  void* user_state() const override { return user_state_.get(); }

  // --- For the runner and the optimizers.
  void set_step(int64_t step) { step_ = step; }
  void set_loss_reduction(ReduceOp op) { loss_reduction_ = op; }
  // After each step: reduces the step's reduced metrics and agrees whether
  // any replica asked to stop or is leaving, in one fused collective (one
  // more per MIN or MAX metric, and one to name each replica that asked),
  // then applies the job's early-stopping rule. Collective.
  absl::StatusOr<StepEnd> EndStep();
  // This replica's agent is shutting down: the next EndStep says so to
  // every replica (StepEnd::leaving).
  void leave() { leaving_ = true; }
  // Asks the next EndStep to have every replica checkpoint its step
  // (StepEnd::checkpoint).
  void want_checkpoint() { checkpoint_wanted_ = true; }
  int local_index() const { return local_index_; }
  const LogicalDevices& logical_devices() const { return logical_; }
  // Whether ON_WRITE variables are one copy shared by the local replicas.
  bool central() const { return central_ != nullptr; }
  // Central storage: waits until every local replica has called it too.
  absl::Status CentralBarrier();
  // The first collective failure, if any: tells a lost peer (retry the
  // job) from a step's own error (fail it).
  const absl::Status& collective_status() const { return collective_status_; }
  std::map<std::string, double> last_metrics() const;
  // Replica 0's warnings about the job's settings so far (AgentJobReport).
  std::vector<std::string> warnings() const;
  // Forgets the metrics reported so far (the evaluator, between batches).
  void ClearMetrics();

  // After the init function: the replicas agree on the newest complete
  // checkpoint any agent holds (each agent's first replica reads its own
  // copy: the job's checkpoint_dir on the chief, a local copy elsewhere).
  // The lowest rank holding it restores it (a copy it cannot read is passed
  // over for the next), and every replica's ON_WRITE variables and
  // optimizer slots are made equal to that rank's (replica 0's when there
  // is none). DATA_LOSS when checkpoints exist and none can be read.
  // Collective. Returns the step to start from.
  absl::StatusOr<int64_t> RestoreOrSync();
  // The rank whose checkpoint RestoreOrSync restored; -1 if none.
  int restored_from_rank() const { return restored_from_rank_; }
  // Writes a checkpoint of the state after `step` steps: ON_READ variables
  // are aggregated (collective), and every agent's first replica writes its
  // agent's copy. A copy that one agent fails to write fails the call on
  // every replica (on the others with the write's code, naming that
  // replica), so that no agent goes on as if the checkpoint were
  // everywhere. Collective.
  absl::Status SaveCheckpoint(int64_t step);
  // After RestoreOrSync restored `step`: writes it again, as SaveCheckpoint
  // does, when some agent's newest copy is not that step (a host that lost
  // its disk, a chief whose last write failed), so that every agent holds
  // the checkpoint the attempt resumed from, even when no step runs after
  // it. Collective.
  absl::Status SaveWhereMissing(int64_t step);

 private:
  // Records the first failure of the communicator, which stays failed.
  absl::Status Collective(absl::Status status);
  absl::Status BroadcastHost(void* host, size_t count, DType dtype, int root);
  // At least `bytes` of device memory for the host collectives below to
  // stage through: one buffer per replica, grown as needed, so that the
  // per-step agreement allocates nothing.
  absl::StatusOr<void*> DeviceStage(size_t bytes);
  // Collectives on host memory, staged through the device where it is a
  // GPU.
  absl::Status AllReduceHost(void* host, size_t count, DType dtype,
                             ReduceOp op);
  // Reduces this step's values of `names` with `op` over every replica, into
  // `reduced`: one collective.
  absl::Status ReduceMetrics(const std::vector<std::string>& names, ReduceOp op,
                             std::map<std::string, double>* reduced);
  // Runs `work` (empty on replicas without any) while every replica
  // all-reduces once a second whether it has ended (group_keepalive.h):
  // checkpoint I/O longer than the collective timeout fails no collective.
  // Collective.
  absl::Status WhileGroupWaits(std::function<absl::Status()> work,
                               std::string what);
  // Whether this replica writes and reads its agent's checkpoint copy: each
  // agent's first replica, when the job checkpoints.
  bool KeepsAgentCopy() const {
    return local_index_ == 0 && !job_->checkpoint_dir.empty();
  }
  // The newest complete checkpoint this replica can read: its step, or -1.
  absl::StatusOr<int64_t> OwnLatestCheckpoint() const;
  // Loads checkpoint `step`, as ReadCheckpoint gave it, into this replica's
  // variables and optimizer slots.
  absl::Status LoadCheckpoint(int64_t step, std::vector<SavedTensor> tensors);
  // A new variable or optimizer slot holding `initial` (host memory, or
  // null for zeros), on this replica's device. Under central storage an
  // ON_WRITE one is local replica 0's, which the others alias (matched by
  // creation order).
  absl::StatusOr<std::unique_ptr<VariableImpl>> NewVariable(
      VariableOptions options, const void* initial);

  const JobInfo* const job_;
  const int replica_id_;
  const int local_index_;
  int restored_from_rank_ = -1;
  bool holds_restored_ = false;  // this agent's newest copy is the restored
  const Device device_;
  LogicalDevices logical_;
  collective::Communicator* const comm_;
  CentralStorage* const central_;
  size_t shared_ = 0;  // central storage: buffers created so far
  int64_t step_ = 0;
  ReduceOp loss_reduction_ = ReduceOp::kMean;
  // This step's metrics to reduce, and whether this replica asked to stop.
  std::map<std::string, std::pair<ReduceOp, double>> to_reduce_;
  std::optional<std::string> stop_reason_;
  bool leaving_ = false;
  bool checkpoint_wanted_ = false;  // until the next EndStep
  EarlyStoppingRule early_stopping_;
  absl::Status collective_status_;
  std::vector<std::unique_ptr<VariableImpl>> variables_;  // creation order
  std::vector<std::unique_ptr<OptimizerImpl>> optimizers_;
  std::vector<char> staging_;  // host buffer of fused collectives
  DeviceBuffer device_stage_;  // see DeviceStage
  std::shared_ptr<void> user_state_;
  mutable absl::Mutex metrics_mu_;
  std::map<std::string, double> metrics_ ABSL_GUARDED_BY(metrics_mu_);
  std::vector<std::string> warnings_ ABSL_GUARDED_BY(metrics_mu_);
};

}  // namespace cohort::agent
