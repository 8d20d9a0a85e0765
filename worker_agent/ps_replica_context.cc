#include "worker_agent/ps_replica_context.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/names.h"
#include "worker_agent/variable_options.h"

namespace cohort::agent {

// A host copy of a variable held by the ps tasks. One executor's.
class HostVariable final : public Variable {
 public:
  HostVariable(VariableOptions options, size_t bytes)
      : options_(std::move(options)), bytes_(bytes) {}

  const VariableOptions& options() const override { return options_; }
  Tensor tensor() override { return {bytes_.data(), count(), options_.dtype}; }

  std::vector<char>& bytes() { return bytes_; }
  HostSlice slice() { return {options_.name, bytes_.data(), bytes_.size()}; }
  // Set by create_optimizer: the ps applies it on push.
  const OptimizerOptions* optimizer = nullptr;

 private:
  const VariableOptions options_;
  std::vector<char> bytes_;
};

class PsOptimizerImpl final : public Optimizer {
 public:
  PsOptimizerImpl(PsReplicaContext* context, OptimizerOptions options,
                  std::vector<HostVariable*> variables)
      : context_(context),
        options_(options),
        variables_(std::move(variables)) {}

  // Each closure is its own sync group: the loss reduction only names how
  // the gradients were made.
  absl::Status apply_gradients(std::span<const Tensor> gradients) override {
    context_->set_loss_reduction(options_.loss_reduction);
    return context_->PushGradients(variables_, gradients);
  }
  const OptimizerOptions& options() const { return options_; }
  const std::vector<HostVariable*>& variables() const { return variables_; }

 private:
  PsReplicaContext* const context_;
  const OptimizerOptions options_;
  const std::vector<HostVariable*> variables_;
};

PsReplicaContext::PsReplicaContext(const JobInfo* job, Device device,
                                   VariableClient* server)
    : job_(job), device_(device), logical_({device}), server_(server) {}

PsReplicaContext::~PsReplicaContext() = default;

absl::StatusOr<Variable*> PsReplicaContext::create_variable(
    const VariableOptions& options, const void* initial) {
  if (absl::Status valid = CheckVariableOptions(options); !valid.ok()) {
    return valid;
  }
  if (absl::Status placed = logical_.CheckPlacement(options); !placed.ok()) {
    return placed;
  }
  if (absl::Status colocated = CheckColocation(
          options, find_variable(options.colocate_with) != nullptr);
      !colocated.ok()) {
    return colocated;
  }
  if (find_variable(options.name) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat(
        "create_variable: \"", options.name, "\" was created already"));
  }
  size_t count = 1;
  for (int64_t d : options.shape) {
    if (d <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("create_variable \"", options.name, "\": dimension ", d,
                       " must be positive"));
    }
    count *= static_cast<size_t>(d);
  }
  auto variable =
      std::make_unique<HostVariable>(options, count * DTypeSize(options.dtype));
  if (initial != nullptr) {
    std::memcpy(variable->bytes().data(), initial, variable->bytes().size());
  }
  variables_.push_back(std::move(variable));
  return variables_.back().get();
}

Variable* PsReplicaContext::find_variable(std::string_view name) {
  for (const auto& v : variables_) {
    if (v->options().name == name) return v.get();
  }
  return nullptr;
}

absl::StatusOr<Optimizer*> PsReplicaContext::create_optimizer(
    const OptimizerOptions& options, std::vector<Variable*> variables) {
  if (options.loss_reduction != ReduceOp::kMean &&
      options.loss_reduction != ReduceOp::kSum) {
    return absl::InvalidArgumentError(
        "create_optimizer: loss_reduction must be MEAN or SUM, as "
        "tf.distribute's loss reductions are");
  }
  if (options.kind == OptimizerKind::kMomentum) {
    return absl::InvalidArgumentError(
        "create_optimizer: the ps tasks apply SGD, Adagrad or Adam; momentum "
        "is not available under ParameterServer");
  }
  std::vector<HostVariable*> own;
  for (Variable* v : variables) {
    HostVariable* host = nullptr;
    for (const auto& mine : variables_) {
      if (mine.get() == v) host = mine.get();
    }
    if (host == nullptr) {
      return absl::InvalidArgumentError(
          "create_optimizer: a variable was not created by this context");
    }
    if (host->options().sync != VariableSync::kOnWrite) {
      return absl::InvalidArgumentError(
          absl::StrCat("create_optimizer: \"", host->options().name,
                       "\" is ON_READ; only ON_WRITE variables are trained"));
    }
    if (host->optimizer != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("create_optimizer: \"", host->options().name,
                       "\" already has an optimizer"));
    }
    own.push_back(host);
  }
  optimizers_.push_back(
      std::make_unique<PsOptimizerImpl>(this, options, std::move(own)));
  for (HostVariable* v : optimizers_.back()->variables()) {
    v->optimizer = &optimizers_.back()->options();
  }
  return optimizers_.back().get();
}

absl::Status PsReplicaContext::DeclareVariables() {
  std::vector<ServerVariable> declared;
  for (const auto& v : variables_) {
    ServerVariable sv;
    sv.options = v->options();
    sv.initial = v->bytes();
    if (v->optimizer != nullptr) {
      sv.trained = true;
      sv.optimizer = *v->optimizer;
    }
    declared.push_back(std::move(sv));
  }
  return server_->Create(declared);
}

absl::Status PsReplicaContext::BeginClosure(int64_t closure,
                                            std::vector<double> args) {
  step_ = closure;
  args_ = std::move(args);
  metrics_.clear();
  stop_reason_.clear();
  std::vector<HostSlice> pull;
  for (const auto& v : variables_) {
    if (v->options().sync == VariableSync::kOnWrite) pull.push_back(v->slice());
  }
  return server_->Pull(pull);
}

absl::StatusOr<v1::ClosureResult> PsReplicaContext::EndClosure() {
  std::vector<HostSlice> push;
  for (const auto& v : variables_) {
    if (v->options().sync == VariableSync::kOnRead) push.push_back(v->slice());
  }
  if (!push.empty()) {
    if (absl::Status pushed = server_->Push(push); !pushed.ok()) return pushed;
  }
  v1::ClosureResult result;
  result.set_closure(step_);
  result.mutable_values()->insert(metrics_.begin(), metrics_.end());
  result.set_stop_reason(stop_reason_);
  return result;
}

absl::Status PsReplicaContext::PushGradients(
    const std::vector<HostVariable*>& variables,
    std::span<const Tensor> gradients) {
  if (gradients.size() != variables.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("apply_gradients: ", gradients.size(), " gradients for ",
                     variables.size(), " variables"));
  }
  std::vector<HostSlice> push;
  for (size_t i = 0; i < variables.size(); ++i) {
    const VariableOptions& o = variables[i]->options();
    if (gradients[i].count != variables[i]->count() ||
        gradients[i].dtype != o.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "apply_gradients: gradient ", i, " has ", gradients[i].count,
          " elements of ", DTypeName(gradients[i].dtype), "; \"", o.name,
          "\" has ", variables[i]->count(), " of ", DTypeName(o.dtype)));
    }
    push.push_back({o.name, gradients[i].data, gradients[i].bytes()});
  }
  return server_->Push(push);
}

absl::Status PsReplicaContext::read_value(Variable& variable, void* host_out) {
  HostVariable* host = nullptr;
  for (const auto& v : variables_) {
    if (v.get() == &variable) host = v.get();
  }
  if (host == nullptr) {
    return absl::InvalidArgumentError(
        "read_value: the variable was not created by this context");
  }
  if (host->options().sync == VariableSync::kOnRead) {
    // The aggregate over the workers, as of their last pushes: this
    // executor's own value goes first.
    if (absl::Status pushed = server_->Push({host->slice()}); !pushed.ok()) {
      return pushed;
    }
  }
  return server_->Pull(
      {{host->options().name, host_out, host->bytes().size()}});
}

// One replica in sync: every collective is the identity.
absl::Status PsReplicaContext::all_reduce(ReduceOp, std::span<const Tensor>) {
  return absl::OkStatus();
}

absl::Status PsReplicaContext::broadcast(Tensor, int root) {
  if (root != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast: root ", root,
                     " is out of range; a ParameterServer "
                     "closure has 1 replica in sync"));
  }
  return absl::OkStatus();
}

absl::Status PsReplicaContext::all_gather(Tensor input, Tensor output) {
  if (output.count != input.count || output.dtype != input.dtype) {
    return absl::InvalidArgumentError(
        "all_gather: the output must hold 1 x the input (1 replica in sync)");
  }
  if (output.data != input.data) {
    std::memcpy(output.data, input.data, input.bytes());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PsReplicaContext::merge_call(
    const std::function<absl::Status(const PerReplica&, std::string*)>& fn,
    std::span<const Tensor> tensors) {
  PerReplica values;
  for (const Tensor& t : tensors) {
    const char* bytes = static_cast<const char*>(t.data);
    values.values.push_back({std::vector<char>(bytes, bytes + t.bytes())});
  }
  std::string result;
  if (absl::Status status = fn(values, &result); !status.ok()) return status;
  return result;
}

void PsReplicaContext::stop_training(std::string_view reason) {
  if (stop_reason_.empty()) {
    stop_reason_ =
        absl::StrCat("closure ", step_, " called stop_training: ",
                     absl::string_view(reason.data(), reason.size()));
  }
}

void PsReplicaContext::report(std::string_view metric, double value) {
  metrics_[std::string(metric)] = value;
}

}  // namespace cohort::agent
