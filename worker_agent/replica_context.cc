#include "worker_agent/replica_context.h"

#include <cstring>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/names.h"
#include "common/status_macros.h"
#include "common/trace.h"
#include "optimizer/optimizer_kernels.h"
#include "spdlog/spdlog.h"
#include "worker_agent/replica_variables.h"
#include "worker_agent/variable_options.h"

namespace cohort::agent {

ReplicaContextImpl::ReplicaContextImpl(const JobInfo* job, int replica_id,
                                       int local_index, Device device,
                                       collective::Communicator* comm,
                                       CentralStorage* central,
                                       std::vector<Device> logical_devices)
    : job_(job),
      replica_id_(replica_id),
      local_index_(local_index),
      device_(device),
      logical_(logical_devices.empty() ? std::vector<Device>{device}
                                       : std::move(logical_devices)),
      comm_(comm),
      central_(central),
      early_stopping_(job->early_stopping) {}

ReplicaContextImpl::~ReplicaContextImpl() = default;

absl::Status ReplicaContextImpl::Collective(absl::Status status) {
  if (!status.ok() && collective_status_.ok()) collective_status_ = status;
  return status;
}

absl::StatusOr<Variable*> ReplicaContextImpl::create_variable(
    const VariableOptions& options, const void* initial) {
  if (absl::Status valid = CheckVariableOptions(options); !valid.ok()) {
    return valid;
  }
  if (absl::Status colocated = CheckColocation(
          options, find_variable(options.colocate_with) != nullptr);
      !colocated.ok()) {
    return colocated;
  }
  if (absl::Status placed = logical_.CheckPlacement(options); !placed.ok()) {
    return placed;
  }
  if (find_variable(options.name) != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat("create_variable: a variable named \"", options.name,
                     "\" exists already"));
  }
  for (int64_t d : options.shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "create_variable \"", options.name, "\": negative dimension ", d));
    }
  }
  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<VariableImpl> variable,
                          NewVariable(options, initial));
  variables_.push_back(std::move(variable));
  return variables_.back().get();
}

absl::StatusOr<std::unique_ptr<VariableImpl>> ReplicaContextImpl::NewVariable(
    VariableOptions options, const void* initial) {
  size_t bytes = DTypeSize(options.dtype);
  for (int64_t d : options.shape) bytes *= static_cast<size_t>(d);
  const bool shared =
      central_ != nullptr && options.sync == VariableSync::kOnWrite;
  if (shared && local_index_ != 0) {
    // Replica 0's value is the value, as a mirrored variable's starting
    // value would be replaced by replica 0's: `initial` goes unused.
    absl::StatusOr<SharedBuffer> buffer =
        central_->Await(shared_, absl::Now() + job_->collective_timeout);
    if (!buffer.ok()) return Collective(buffer.status());
    if (buffer->name != options.name || buffer->bytes != bytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "central storage: replica ", replica_id_, " created \"", options.name,
          "\" (", bytes, " bytes) where local replica 0 created \"",
          buffer->name, "\" (", buffer->bytes,
          " bytes); every replica must create the same variables in the "
          "same order"));
    }
    ++shared_;
    return std::make_unique<VariableImpl>(std::move(options), buffer->data);
  }
  // Over several GPUs the one copy sits in host memory that every GPU maps,
  // as TF's CentralStorage keeps it on the CPU; on one GPU, in its memory.
  const bool mapped = shared && device_.is_cuda() && job_->num_replicas > 1;
  const Device& home = logical_.device(options.logical_device);
  COHORT_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                          mapped ? DeviceBuffer::AllocateShared(home, bytes)
                                 : DeviceBuffer::Allocate(home, bytes));
  if (initial != nullptr) {
    COHORT_RETURN_IF_ERROR(CopyToDevice(home, buffer.data(), initial, bytes));
  }
  if (shared) {
    central_->Publish({options.name, buffer.data(), bytes});
    ++shared_;
  }
  return std::make_unique<VariableImpl>(std::move(options), std::move(buffer));
}

Variable* ReplicaContextImpl::find_variable(std::string_view name) {
  for (const auto& variable : variables_) {
    if (variable->options().name == name) return variable.get();
  }
  return nullptr;
}

absl::StatusOr<Optimizer*> ReplicaContextImpl::create_optimizer(
    const OptimizerOptions& options, std::vector<Variable*> variables) {
  if (options.kind == OptimizerKind::kAdagrad) {
    return absl::InvalidArgumentError(
        "create_optimizer: Adagrad is applied by parameter servers, under "
        "ParameterServer; the mirrored strategies offer SGD, momentum and "
        "Adam");
  }
  if (options.loss_reduction != ReduceOp::kMean &&
      options.loss_reduction != ReduceOp::kSum) {
    return absl::InvalidArgumentError(
        "create_optimizer: loss_reduction must be MEAN or SUM, as "
        "tf.distribute's loss reductions are");
  }
  std::vector<VariableImpl*> owned;
  std::vector<std::vector<std::unique_ptr<VariableImpl>>> slots;
  std::set<std::string> slot_names;
  for (const auto& optimizer : optimizers_) {
    for (const auto& of_variable : optimizer->slots()) {
      for (const auto& slot : of_variable) {
        slot_names.insert(slot->options().name);
      }
    }
  }
  for (Variable* variable : variables) {
    auto* impl = dynamic_cast<VariableImpl*>(variable);
    if (impl == nullptr || find_variable(variable->options().name) != impl) {
      return absl::InvalidArgumentError(
          "create_optimizer: a variable was not created by this replica's "
          "create_variable");
    }
    const VariableOptions& vo = impl->options();
    if (vo.sync != VariableSync::kOnWrite ||
        (vo.dtype != DType::kFloat32 && vo.dtype != DType::kFloat64)) {
      return absl::InvalidArgumentError(
          absl::StrCat("create_optimizer: variable \"", vo.name,
                       "\" must be ON_WRITE and float32 or float64"));
    }
    owned.push_back(impl);
    std::vector<std::unique_ptr<VariableImpl>> own_slots;
    for (int s = 0; s < optimizer::SlotCount(options.kind); ++s) {
      VariableOptions slot = vo;
      slot.name =
          absl::StrCat(vo.name, "/", optimizer::SlotName(options.kind, s));
      // Two optimizers of one kind on a variable would both keep "v/m",
      // and every checkpoint would fail on the name.
      if (!slot_names.insert(slot.name).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "create_optimizer: slot \"", slot.name, "\" exists already: \"",
            vo.name, "\" has another optimizer of this kind"));
      }
      COHORT_ASSIGN_OR_RETURN(std::unique_ptr<VariableImpl> buffer,
                              NewVariable(std::move(slot), nullptr));
      own_slots.push_back(std::move(buffer));
    }
    slots.push_back(std::move(own_slots));
  }
  optimizers_.push_back(std::make_unique<OptimizerImpl>(
      this, options, std::move(owned), std::move(slots)));
  return optimizers_.back().get();
}

absl::Status OptimizerImpl::apply_gradients(std::span<const Tensor> gradients) {
  if (gradients.size() != variables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("apply_gradients: ", gradients.size(), " gradients for ",
                     variables_.size(), " variables"));
  }
  for (size_t i = 0; i < gradients.size(); ++i) {
    const VariableOptions& vo = variables_[i]->options();
    if (gradients[i].count != variables_[i]->count() ||
        gradients[i].dtype != vo.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "apply_gradients: the gradient of \"", vo.name, "\" has ",
          gradients[i].count, " ", DTypeName(gradients[i].dtype),
          " elements; the variable has ", variables_[i]->count(), " ",
          DTypeName(vo.dtype)));
    }
  }
  context_->set_loss_reduction(options_.loss_reduction);
  if (absl::Status reduced =
          context_->all_reduce(options_.loss_reduction, gradients);
      !reduced.ok()) {
    return reduced;
  }
  ++iterations_;
  if (!context_->central()) return Update(gradients);
  // One copy, written once: by local replica 0, after every replica has
  // finished reading this step's values (the first barrier) and before any
  // reads the next ones (the second).
  COHORT_RETURN_IF_ERROR(context_->CentralBarrier());
  if (context_->local_index() == 0) {
    COHORT_RETURN_IF_ERROR(Update(gradients));
    COHORT_RETURN_IF_ERROR(Synchronize(context_->device()));
  }
  return context_->CentralBarrier();
}

absl::Status OptimizerImpl::Update(std::span<const Tensor> gradients) {
  ScopedSpan span("optimizer");
  const LogicalDevices& logical = context_->logical_devices();
  for (size_t i = 0; i < gradients.size(); ++i) {
    // Where the variable lives: the update runs there, on its stream.
    const Device& device =
        logical.device(variables_[i]->options().logical_device);
    if (logical.count() > 1) COHORT_RETURN_IF_ERROR(MakeCurrent(device));
    const Tensor var = variables_[i]->tensor();
    void* slot0 = slots_[i].size() > 0 ? slots_[i][0]->tensor().data : nullptr;
    void* slot1 = slots_[i].size() > 1 ? slots_[i][1]->tensor().data : nullptr;
    absl::Status applied;
    if (device.is_cuda()) {
#ifdef COHORT_HAVE_CUDA
      applied = optimizer::ApplyUpdateCuda(
          options_, var.dtype, var.data, gradients[i].data, slot0, slot1,
          var.count, iterations_, device.stream);
#else
      applied = absl::FailedPreconditionError("built without CUDA");
#endif
    } else {
      applied = optimizer::ApplyUpdateHost(options_, var.dtype, var.data,
                                           gradients[i].data, slot0, slot1,
                                           var.count, iterations_);
    }
    if (!applied.ok()) return applied;
  }
  if (logical.count() == 1) return absl::OkStatus();
  // The next step's reads, on any device, follow every device's update.
  COHORT_RETURN_IF_ERROR(logical.SynchronizeAll());
  return MakeCurrent(context_->device());
}

absl::Status ReplicaContextImpl::CentralBarrier() {
  if (!collective_status_.ok()) return collective_status_;
  return Collective(central_->Barrier(absl::Now() + job_->collective_timeout));
}

absl::Status ReplicaContextImpl::read_value(Variable& variable,
                                            void* host_out) {
  const VariableOptions& vo = variable.options();
  const Tensor own = variable.tensor();
  if (vo.sync == VariableSync::kOnWrite) {
    return CopyToHost(device_, host_out, own.data, own.bytes());
  }
  // Aggregate a copy, so that each replica keeps its own value.
  absl::StatusOr<DeviceBuffer> scratch =
      DeviceBuffer::Allocate(device_, own.bytes());
  if (!scratch.ok()) return scratch.status();
  if (absl::Status copied =
          CopyOnDevice(device_, scratch->data(), own.data, own.bytes());
      !copied.ok()) {
    return copied;
  }
  const Tensor copy{scratch->data(), own.count, own.dtype};
  absl::Status aggregated;
  switch (vo.aggregation) {
    case Aggregation::kSum:
      aggregated = all_reduce(ReduceOp::kSum, copy);
      break;
    case Aggregation::kMean:
      aggregated = all_reduce(ReduceOp::kMean, copy);
      break;
    case Aggregation::kOnlyFirstReplica:
      aggregated = broadcast(copy, 0);
      break;
  }
  if (!aggregated.ok()) return aggregated;
  return CopyToHost(device_, host_out, copy.data, copy.bytes());
}

absl::Status ReplicaContextImpl::all_reduce(ReduceOp op,
                                            std::span<const Tensor> tensors) {
  if (!collective_status_.ok()) return collective_status_;
  if (absl::Status synced = Synchronize(device_); !synced.ok()) return synced;
  const collective::ReduceOp cop = op;
  // On CPU, tensors of one dtype travel as one fused message; device
  // buffers go one by one (no host round trip).
  const bool fuse = !device_.is_cuda() && tensors.size() > 1;
  size_t begin = 0;
  while (begin < tensors.size()) {
    size_t end = begin + 1;
    while (fuse && end < tensors.size() &&
           tensors[end].dtype == tensors[begin].dtype) {
      ++end;
    }
    const DType dtype = tensors[begin].dtype;
    if (end - begin == 1) {
      COHORT_RETURN_IF_ERROR(Collective(comm_->AllReduce(
          tensors[begin].data, tensors[begin].count, dtype, cop)));
    } else {
      size_t total = 0;
      for (size_t i = begin; i < end; ++i) total += tensors[i].bytes();
      staging_.resize(total);
      size_t offset = 0;
      for (size_t i = begin; i < end; ++i) {
        std::memcpy(staging_.data() + offset, tensors[i].data,
                    tensors[i].bytes());
        offset += tensors[i].bytes();
      }
      COHORT_RETURN_IF_ERROR(Collective(comm_->AllReduce(
          staging_.data(), total / DTypeSize(dtype), dtype, cop)));
      offset = 0;
      for (size_t i = begin; i < end; ++i) {
        std::memcpy(tensors[i].data, staging_.data() + offset,
                    tensors[i].bytes());
        offset += tensors[i].bytes();
      }
    }
    begin = end;
  }
  return absl::OkStatus();
}

absl::Status ReplicaContextImpl::broadcast(Tensor tensor, int root) {
  if (!collective_status_.ok()) return collective_status_;
  if (root < 0 || root >= job_->num_replicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast: root ", root, " is not a replica (0..",
                     job_->num_replicas - 1, ")"));
  }
  COHORT_RETURN_IF_ERROR(Synchronize(device_));
  return Collective(
      comm_->Broadcast(tensor.data, tensor.count, tensor.dtype, root));
}

absl::Status ReplicaContextImpl::all_gather(Tensor input, Tensor output) {
  if (!collective_status_.ok()) return collective_status_;
  if (output.dtype != input.dtype ||
      output.count != input.count * static_cast<size_t>(job_->num_replicas)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "all_gather: the output needs ", job_->num_replicas, " x ", input.count,
        " ", DTypeName(input.dtype), " elements; it has ", output.count, " ",
        DTypeName(output.dtype)));
  }
  COHORT_RETURN_IF_ERROR(Synchronize(device_));
  return Collective(
      comm_->AllGather(input.data, output.data, input.count, input.dtype));
}

absl::StatusOr<std::string> ReplicaContextImpl::merge_call(
    const std::function<absl::Status(const PerReplica&, std::string*)>& fn,
    std::span<const Tensor> tensors) {
  const size_t n = static_cast<size_t>(job_->num_replicas);
  PerReplica gathered;
  for (const Tensor& tensor : tensors) {
    absl::StatusOr<DeviceBuffer> all =
        DeviceBuffer::Allocate(device_, tensor.bytes() * n);
    if (!all.ok()) return all.status();
    COHORT_RETURN_IF_ERROR(all_gather(
        tensor, Tensor{all->data(), tensor.count * n, tensor.dtype}));
    std::vector<char> host(tensor.bytes() * n);
    COHORT_RETURN_IF_ERROR(
        CopyToHost(device_, host.data(), all->data(), host.size()));
    std::vector<std::vector<char>> per_replica(n);
    for (size_t r = 0; r < n; ++r) {
      per_replica[r].assign(host.begin() + r * tensor.bytes(),
                            host.begin() + (r + 1) * tensor.bytes());
    }
    gathered.values.push_back(std::move(per_replica));
  }
  // Replica 0 runs the function; its status code and its result (or error
  // message) go to every replica. The broadcast is also the meeting point.
  int64_t header[2] = {0, 0};  // code, bytes
  std::string payload;
  if (replica_id_ == 0) {
    std::string result;
    const absl::Status status = fn(gathered, &result);
    payload = status.ok() ? std::move(result) : std::string(status.message());
    header[0] = static_cast<int64_t>(status.code());
    header[1] = static_cast<int64_t>(payload.size());
  }
  COHORT_RETURN_IF_ERROR(BroadcastHost(header, 2, DType::kInt64, 0));
  if (header[1] > 0) {
    std::vector<int64_t> words((static_cast<size_t>(header[1]) + 7) / 8);
    if (replica_id_ == 0)
      std::memcpy(words.data(), payload.data(), payload.size());
    COHORT_RETURN_IF_ERROR(
        BroadcastHost(words.data(), words.size(), DType::kInt64, 0));
    payload.assign(reinterpret_cast<const char*>(words.data()),
                   static_cast<size_t>(header[1]));
  }
  if (header[0] != static_cast<int64_t>(absl::StatusCode::kOk)) {
    return absl::Status(static_cast<absl::StatusCode>(header[0]), payload);
  }
  return payload;
}

absl::Status ReplicaContextImpl::reduce(ReduceOp op, std::span<double> values) {
  if (values.empty()) return absl::OkStatus();
  return AllReduceHost(values.data(), values.size(), DType::kFloat64, op);
}

void ReplicaContextImpl::report(std::string_view metric, double value) {
  absl::MutexLock lock(&metrics_mu_);
  metrics_[std::string(metric)] = value;
}

void ReplicaContextImpl::report(std::string_view metric, double value,
                                ReduceOp op) {
  to_reduce_[std::string(metric)] = {op, value};
}

void ReplicaContextImpl::stop_training(std::string_view reason) {
  if (!stop_reason_.has_value()) stop_reason_ = std::string(reason);
}

absl::Status ReplicaContextImpl::ReduceMetrics(
    const std::vector<std::string>& names, ReduceOp op,
    std::map<std::string, double>* reduced) {
  if (names.empty()) return absl::OkStatus();
  std::vector<double> values;
  for (const std::string& name : names)
    values.push_back(to_reduce_[name].second);
  COHORT_RETURN_IF_ERROR(reduce(op, values));
  for (size_t i = 0; i < names.size(); ++i) (*reduced)[names[i]] = values[i];
  return absl::OkStatus();
}

absl::StatusOr<StepEnd> ReplicaContextImpl::EndStep() {
  // SUM and MEAN metrics travel with the stop votes in one SUM collective
  // (MEAN divides afterwards, identically everywhere); MIN and MAX take one
  // collective each, only in steps that report such metrics.
  std::vector<std::string> summed, minimum, maximum;
  for (const auto& [name, entry] : to_reduce_) {
    switch (entry.first) {
      case ReduceOp::kSum:
      case ReduceOp::kMean:
        summed.push_back(name);
        break;
      case ReduceOp::kMin:
        minimum.push_back(name);
        break;
      case ReduceOp::kMax:
        maximum.push_back(name);
        break;
    }
  }
  // The votes' slots in `sums`, before the summed metrics.
  enum : size_t { kStopVote, kLeaveVote, kCheckpointVote, kVotes };
  std::vector<double> sums = {stop_reason_.has_value() ? 1.0 : 0.0,
                              leaving_ ? 1.0 : 0.0,
                              checkpoint_wanted_ ? 1.0 : 0.0};
  checkpoint_wanted_ = false;
  for (const std::string& name : summed)
    sums.push_back(to_reduce_[name].second);
  COHORT_RETURN_IF_ERROR(reduce(ReduceOp::kSum, sums));
  std::map<std::string, double> reduced;
  for (size_t i = 0; i < summed.size(); ++i) {
    double value = sums[i + kVotes];
    if (to_reduce_[summed[i]].first == ReduceOp::kMean) {
      value /= job_->num_replicas;
    }
    reduced[summed[i]] = value;
  }
  COHORT_RETURN_IF_ERROR(ReduceMetrics(minimum, ReduceOp::kMin, &reduced));
  COHORT_RETURN_IF_ERROR(ReduceMetrics(maximum, ReduceOp::kMax, &reduced));
  to_reduce_.clear();
  {
    absl::MutexLock lock(&metrics_mu_);
    for (const auto& [name, value] : reduced) metrics_[name] = value;
  }

  StepEnd end;
  end.checkpoint = sums[kCheckpointVote] > 0;
  if (sums[kLeaveVote] > 0) {
    double first = leaving_ ? replica_id_ : job_->num_replicas;
    COHORT_RETURN_IF_ERROR(
        reduce(ReduceOp::kMin, std::span<double>(&first, 1)));
    end.leaving = static_cast<int>(first);
  }
  if (sums[kStopVote] > 0) {
    // Name the lowest replica that asked; only its own agent knows why.
    double first = stop_reason_.has_value() ? replica_id_ : job_->num_replicas;
    COHORT_RETURN_IF_ERROR(
        reduce(ReduceOp::kMin, std::span<double>(&first, 1)));
    end.stop = true;
    end.stopped_by = static_cast<int>(first);
    if (end.stopped_by == replica_id_) {
      end.reason = absl::StrCat("replica ", replica_id_,
                                " called stop_training: ", *stop_reason_);
    }
    stop_reason_.reset();
    return end;
  }
  if (std::optional<std::string> verdict =
          early_stopping_.Observe(step_ + 1, reduced);
      verdict.has_value()) {
    end.stop = true;
    end.reason = *std::move(verdict);
  }
  if (std::optional<std::string> warning = early_stopping_.TakeWarning();
      warning.has_value() && replica_id_ == 0) {
    spdlog::warn("{}", *warning);
    absl::MutexLock lock(&metrics_mu_);
    warnings_.push_back(*std::move(warning));
  }
  return end;
}

void ReplicaContextImpl::ClearMetrics() {
  absl::MutexLock lock(&metrics_mu_);
  metrics_.clear();
}

std::map<std::string, double> ReplicaContextImpl::last_metrics() const {
  absl::MutexLock lock(&metrics_mu_);
  return metrics_;
}

std::vector<std::string> ReplicaContextImpl::warnings() const {
  absl::MutexLock lock(&metrics_mu_);
  return warnings_;
}

}  // namespace cohort::agent
