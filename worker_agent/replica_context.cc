#include "worker_agent/replica_context.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/names.h"
#include "common/status_macros.h"
#include "optimizer/optimizer_kernels.h"
#include "worker_agent/replica_variables.h"
#include "worker_agent/variable_options.h"

namespace cohort::agent {

void LocalMerge::Publish(int64_t generation, absl::Status status) {
  absl::MutexLock lock(&mu_);
  published_ = generation;
  status_ = std::move(status);
}

absl::Status LocalMerge::Await(int64_t generation, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto ready = [&] { return published_ >= generation || !aborted_.ok(); };
  if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
    return absl::DeadlineExceededError(
        "merge_call: local replica 0 did not finish the merge function in "
        "time");
  }
  return aborted_.ok() ? status_ : aborted_;
}

void LocalMerge::Abort(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (aborted_.ok()) aborted_ = status;
}

ReplicaContextImpl::ReplicaContextImpl(const JobInfo* job, int replica_id,
                                       int local_index, Device device,
                                       collective::Communicator* comm,
                                       LocalMerge* merge,
                                       CentralStorage* central)
    : job_(job),
      replica_id_(replica_id),
      local_index_(local_index),
      device_(device),
      comm_(comm),
      merge_(merge),
      central_(central) {}

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
  if (shared && device_.is_cuda() && job_->num_replicas > 1) {
    // The one copy would have to sit in host memory that every GPU maps.
    return absl::FailedPreconditionError(absl::StrCat(
        "central storage over ", job_->num_replicas,
        " CUDA devices is not supported: the variables can live on the "
        "agent's only GPU (devices_per_agent=1), or use Mirrored"));
  }
  COHORT_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                          DeviceBuffer::Allocate(device_, bytes));
  if (initial != nullptr) {
    COHORT_RETURN_IF_ERROR(
        CopyToDevice(device_, buffer.data(), initial, bytes));
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
  std::vector<VariableImpl*> owned;
  std::vector<std::vector<std::unique_ptr<VariableImpl>>> slots;
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
  if (absl::Status reduced = context_->all_reduce(ReduceOp::kMean, gradients);
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
  const Device& device = context_->device();
  for (size_t i = 0; i < gradients.size(); ++i) {
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
  return absl::OkStatus();
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

absl::Status ReplicaContextImpl::merge_call(
    const std::function<absl::Status(const PerReplica&)>& fn,
    std::span<const Tensor> tensors) {
  const int64_t generation = ++merges_;
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
  if (tensors.empty()) {
    // Nothing to gather: still a meeting point of every replica.
    COHORT_RETURN_IF_ERROR(Collective(comm_->Barrier()));
  }
  if (local_index_ == 0) {
    absl::Status status = fn(gathered);
    merge_->Publish(generation, status);
    return status;
  }
  return merge_->Await(generation, absl::Now() + job_->collective_timeout);
}

void ReplicaContextImpl::report(std::string_view metric, double value) {
  absl::MutexLock lock(&metrics_mu_);
  metrics_[std::string(metric)] = value;
}

std::map<std::string, double> ReplicaContextImpl::last_metrics() const {
  absl::MutexLock lock(&metrics_mu_);
  return metrics_;
}

}  // namespace cohort::agent
