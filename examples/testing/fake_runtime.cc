#include "examples/testing/fake_runtime.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "optimizer/optimizer_kernels.h"

namespace cohort::examples::testing {
namespace {

// The fake reduces on the host in the element type; 16-bit floats, which
// the real runtime reduces through float, it refuses.
absl::Status CheckDType(DType dtype, const std::string& what) {
  if (DTypeSize(dtype) >= 4) return absl::OkStatus();
  return absl::InvalidArgumentError(what + ": the fake runtime has no " +
                                    DTypeName(dtype));
}

template <typename T>
void Combine(ReduceOp op, const T* a, T* b, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMean:
        b[i] = a[i] + b[i];
        break;
      case ReduceOp::kMin:
        b[i] = std::min(a[i], b[i]);
        break;
      case ReduceOp::kMax:
        b[i] = std::max(a[i], b[i]);
        break;
    }
  }
}

template <typename T>
void Divide(T* b, size_t count, int n) {
  for (size_t i = 0; i < count; ++i) b[i] = b[i] / static_cast<T>(n);
}

std::string Bytes(const Tensor& t) {
  return std::string(static_cast<const char*>(t.data), t.bytes());
}

void ReduceInto(ReduceOp op, DType dtype, const char* a, char* b,
                size_t count) {
  switch (dtype) {
    case DType::kFloat32:
      return Combine(op, reinterpret_cast<const float*>(a),
                     reinterpret_cast<float*>(b), count);
    case DType::kFloat64:
      return Combine(op, reinterpret_cast<const double*>(a),
                     reinterpret_cast<double*>(b), count);
    case DType::kInt32:
      return Combine(op, reinterpret_cast<const int32_t*>(a),
                     reinterpret_cast<int32_t*>(b), count);
    case DType::kInt64:
      return Combine(op, reinterpret_cast<const int64_t*>(a),
                     reinterpret_cast<int64_t*>(b), count);
    case DType::kFloat16:
    case DType::kBFloat16:
      return;  // refused where the tensor was made (CheckDType)
  }
}

}  // namespace

// --- FakeGroup.

absl::StatusOr<std::vector<std::string>> FakeGroup::Exchange(
    int rank, const std::string& tag, std::string bytes) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + timeout_;
  // A fast replica waits until the previous round's results are read.
  auto can_enter = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return readers_ == 0 || !aborted_.ok();
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&can_enter), deadline)) {
    aborted_ = absl::DeadlineExceededError("fake collective: stuck at " + tag);
  }
  if (!aborted_.ok()) return aborted_;
  slots_[rank] = {tag, std::move(bytes)};
  if (++arrived_ == size_) {
    result_.clear();
    for (int r = 0; r < size_; ++r) {
      if (slots_[r].first != slots_[0].first) {
        aborted_ = absl::InternalError(
            "collective mismatch: replica 0 issued " + slots_[0].first +
            ", replica " + std::to_string(r) + " issued " + slots_[r].first);
        return aborted_;
      }
      result_.push_back(std::move(slots_[r].second));
    }
    arrived_ = 0;
    readers_ = size_;
  } else {
    auto complete = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return readers_ > 0 || !aborted_.ok();
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&complete), deadline)) {
      aborted_ = absl::DeadlineExceededError(
          "fake collective: replica " + std::to_string(rank) +
          " waited in vain for the others at " + tag);
    }
    if (!aborted_.ok()) return aborted_;
  }
  std::vector<std::string> out = result_;
  --readers_;
  return out;
}

void FakeGroup::Abort(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (aborted_.ok()) aborted_ = status;
}

// --- FakeVariable.

std::vector<double> FakeVariable::values() {
  std::vector<double> out(count());
  const Tensor t = tensor();
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype) {
      case DType::kFloat32:
        out[i] = t.as<float>()[i];
        break;
      case DType::kFloat64:
        out[i] = t.as<double>()[i];
        break;
      case DType::kInt32:
        out[i] = t.as<int32_t>()[i];
        break;
      case DType::kInt64:
        out[i] = static_cast<double>(t.as<int64_t>()[i]);
        break;
      case DType::kFloat16:
      case DType::kBFloat16:
        out[i] = std::nan("");  // never a variable's (CheckDType)
        break;
    }
  }
  return out;
}

// --- FakeOptimizer: the agent's own optimizer updates, in the variable's
// precision, so that the examples' tests train with the math that ships.

class FakeOptimizer final : public Optimizer {
 public:
  FakeOptimizer(FakeReplicaContext* ctx, const OptimizerOptions& options,
                std::vector<Variable*> variables)
      : ctx_(ctx), options_(options), variables_(std::move(variables)) {
    const int slots = std::max(optimizer::SlotCount(options_.kind), 0);
    for (Variable* v : variables_) {
      const size_t words = (v->tensor().bytes() + 7) / 8;
      slots_.emplace_back(static_cast<size_t>(slots),
                          std::vector<uint64_t>(words, 0));
    }
  }

  absl::Status apply_gradients(std::span<const Tensor> gradients) override {
    if (gradients.size() != variables_.size()) {
      return absl::InvalidArgumentError(
          "apply_gradients: " + std::to_string(gradients.size()) +
          " gradients for " + std::to_string(variables_.size()) + " variables");
    }
    // The caller's buffers stay as they were; the reduction works on copies.
    std::vector<std::vector<uint64_t>> copies;
    std::vector<Tensor> reduced;
    for (size_t i = 0; i < gradients.size(); ++i) {
      const Tensor& g = gradients[i];
      const Tensor v = variables_[i]->tensor();
      if (g.count != v.count || g.dtype != v.dtype) {
        return absl::InvalidArgumentError(
            "apply_gradients: gradient " + std::to_string(i) + " has " +
            std::to_string(g.count) + " " + DTypeName(g.dtype) +
            " elements, its variable " + std::to_string(v.count) + " " +
            DTypeName(v.dtype));
      }
      copies.emplace_back((g.bytes() + 7) / 8);
      std::memcpy(copies.back().data(), g.data, g.bytes());
      reduced.push_back({copies.back().data(), g.count, g.dtype});
    }
    ctx_->set_loss_reduction(options_.loss_reduction);
    if (absl::Status s = ctx_->all_reduce(options_.loss_reduction, reduced);
        !s.ok()) {
      return s;
    }
    ++iterations_;
    for (size_t i = 0; i < variables_.size(); ++i) {
      const Tensor v = variables_[i]->tensor();
      std::vector<std::vector<uint64_t>>& slots = slots_[i];
      absl::Status applied = optimizer::ApplyUpdateHost(
          options_, v.dtype, v.data, reduced[i].data,
          slots.size() > 0 ? slots[0].data() : nullptr,
          slots.size() > 1 ? slots[1].data() : nullptr, v.count, iterations_);
      if (!applied.ok()) return applied;
    }
    return absl::OkStatus();
  }

 private:
  FakeReplicaContext* const ctx_;
  const OptimizerOptions options_;
  const std::vector<Variable*> variables_;
  // Per variable, the optimizer's slots in the variable's dtype.
  std::vector<std::vector<std::vector<uint64_t>>> slots_;
  int64_t iterations_ = 0;
};

// --- FakeReplicaContext.

FakeReplicaContext::FakeReplicaContext(const Job* job, int rank,
                                       FakeGroup* group)
    : job_(job),
      rank_(rank),
      group_(group),
      device_{.kind = Device::Kind::kCpu, .index = rank} {}

FakeReplicaContext::~FakeReplicaContext() = default;

absl::StatusOr<Variable*> FakeReplicaContext::create_variable(
    const VariableOptions& options, const void* initial) {
  if (options.name.empty() || find_variable(options.name) != nullptr) {
    return absl::InvalidArgumentError("create_variable: bad or taken name \"" +
                                      options.name + "\"");
  }
  for (int64_t d : options.shape) {
    if (d < 0) return absl::InvalidArgumentError("create_variable: bad shape");
  }
  if (absl::Status s = CheckDType(options.dtype, "create_variable"); !s.ok()) {
    return s;
  }
  auto variable = std::make_unique<FakeVariable>(options);
  if (initial != nullptr) {
    std::memcpy(variable->tensor().data, initial, variable->tensor().bytes());
  }
  variables_.push_back(std::move(variable));
  return variables_.back().get();
}

Variable* FakeReplicaContext::find_variable(std::string_view name) {
  for (const auto& v : variables_) {
    if (v->options().name == name) return v.get();
  }
  return nullptr;
}

absl::StatusOr<Optimizer*> FakeReplicaContext::create_optimizer(
    const OptimizerOptions& options, std::vector<Variable*> variables) {
  for (Variable* v : variables) {
    if (v == nullptr || v->options().sync != VariableSync::kOnWrite) {
      return absl::InvalidArgumentError(
          "create_optimizer: only ON_WRITE variables can be optimized");
    }
  }
  optimizers_.push_back(
      std::make_unique<FakeOptimizer>(this, options, std::move(variables)));
  return optimizers_.back().get();
}

absl::Status FakeReplicaContext::read_value(Variable& variable,
                                            void* host_out) {
  const Tensor t = variable.tensor();
  if (variable.options().sync == VariableSync::kOnWrite) {
    std::memcpy(host_out, t.data, t.bytes());
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> all = group_->Exchange(
      rank_, "read_value " + variable.options().name, Bytes(t));
  if (!all.ok()) return all.status();
  std::string acc = (*all)[0];
  if (variable.options().aggregation != Aggregation::kOnlyFirstReplica) {
    for (int r = 1; r < group_->size(); ++r) {
      ReduceInto(ReduceOp::kSum, t.dtype, (*all)[r].data(), acc.data(),
                 t.count);
    }
  }
  std::memcpy(host_out, acc.data(), acc.size());
  if (variable.options().aggregation == Aggregation::kMean) {
    Tensor out{host_out, t.count, t.dtype};
    if (t.dtype == DType::kFloat32)
      Divide(out.as<float>(), t.count, group_->size());
    if (t.dtype == DType::kFloat64)
      Divide(out.as<double>(), t.count, group_->size());
    if (t.dtype == DType::kInt32)
      Divide(out.as<int32_t>(), t.count, group_->size());
    if (t.dtype == DType::kInt64)
      Divide(out.as<int64_t>(), t.count, group_->size());
  }
  return absl::OkStatus();
}

absl::Status FakeReplicaContext::all_reduce(ReduceOp op,
                                            std::span<const Tensor> tensors) {
  std::string tag = "all_reduce(op " + std::to_string(static_cast<int>(op));
  std::string bytes;
  for (const Tensor& t : tensors) {
    if (absl::Status s = CheckDType(t.dtype, "all_reduce"); !s.ok()) return s;
    tag += ", " + std::to_string(t.count) + " " + DTypeName(t.dtype);
    bytes += Bytes(t);
  }
  tag += ")";
  absl::StatusOr<std::vector<std::string>> all =
      group_->Exchange(rank_, tag, std::move(bytes));
  if (!all.ok()) return all.status();
  size_t offset = 0;
  for (const Tensor& t : tensors) {
    char* out = static_cast<char*>(t.data);
    std::memcpy(out, (*all)[0].data() + offset, t.bytes());
    for (int r = 1; r < group_->size(); ++r) {
      ReduceInto(op, t.dtype, (*all)[r].data() + offset, out, t.count);
    }
    if (op == ReduceOp::kMean) {
      if (t.dtype == DType::kFloat32)
        Divide(t.as<float>(), t.count, group_->size());
      if (t.dtype == DType::kFloat64)
        Divide(t.as<double>(), t.count, group_->size());
      if (t.dtype == DType::kInt32)
        Divide(t.as<int32_t>(), t.count, group_->size());
      if (t.dtype == DType::kInt64)
        Divide(t.as<int64_t>(), t.count, group_->size());
    }
    offset += t.bytes();
  }
  return absl::OkStatus();
}

absl::Status FakeReplicaContext::broadcast(Tensor tensor, int root) {
  if (root < 0 || root >= group_->size()) {
    return absl::InvalidArgumentError("broadcast: bad root");
  }
  absl::StatusOr<std::vector<std::string>> all = group_->Exchange(
      rank_,
      "broadcast(" + std::to_string(tensor.count) + " " +
          DTypeName(tensor.dtype) + " from " + std::to_string(root) + ")",
      Bytes(tensor));
  if (!all.ok()) return all.status();
  std::memcpy(tensor.data, (*all)[root].data(), tensor.bytes());
  return absl::OkStatus();
}

absl::Status FakeReplicaContext::all_gather(Tensor input, Tensor output) {
  if (output.dtype != input.dtype ||
      output.count != input.count * static_cast<size_t>(group_->size())) {
    return absl::InvalidArgumentError("all_gather: bad output size");
  }
  absl::StatusOr<std::vector<std::string>> all =
      group_->Exchange(rank_,
                       "all_gather(" + std::to_string(input.count) + " " +
                           DTypeName(input.dtype) + ")",
                       Bytes(input));
  if (!all.ok()) return all.status();
  for (int r = 0; r < group_->size(); ++r) {
    std::memcpy(static_cast<char*>(output.data) + r * input.bytes(),
                (*all)[r].data(), input.bytes());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FakeReplicaContext::merge_call(
    const std::function<absl::Status(const PerReplica&, std::string*)>& fn,
    std::span<const Tensor> tensors) {
  PerReplica per_replica;
  for (const Tensor& t : tensors) {
    absl::StatusOr<std::vector<std::string>> all =
        group_->Exchange(rank_, "merge_call", Bytes(t));
    if (!all.ok()) return all.status();
    per_replica.values.emplace_back();
    for (const std::string& bytes : *all) {
      per_replica.values.back().emplace_back(bytes.begin(), bytes.end());
    }
  }
  // Replica 0 runs the function; the others take its status and result.
  std::string outcome;
  if (rank_ == 0) {
    std::string result;
    const absl::Status status = fn(per_replica, &result);
    outcome = std::to_string(static_cast<int>(status.code())) + ":" +
              (status.ok() ? result : std::string(status.message()));
  }
  absl::StatusOr<std::vector<std::string>> all =
      group_->Exchange(rank_, "merge_call result", outcome);
  if (!all.ok()) return all.status();
  const std::string& first = (*all)[0];
  const size_t colon = first.find(':');
  const auto code =
      static_cast<absl::StatusCode>(std::stoi(first.substr(0, colon)));
  if (code != absl::StatusCode::kOk) {
    return absl::Status(code, first.substr(colon + 1));
  }
  return first.substr(colon + 1);
}

absl::Status FakeReplicaContext::reduce(ReduceOp op, std::span<double> values) {
  return all_reduce(op, Tensor{values.data(), values.size(), DType::kFloat64});
}

void FakeReplicaContext::report(std::string_view metric, double value,
                                ReduceOp op) {
  // A replica's failure shows in its next collective; the value stays local.
  if (reduce(op, std::span<double>(&value, 1)).ok()) report(metric, value);
}

absl::StatusOr<bool> FakeReplicaContext::AgreeToStop() {
  double votes = stop_reason_.has_value() ? 1 : 0;
  if (absl::Status s = reduce(ReduceOp::kSum, std::span<double>(&votes, 1));
      !s.ok()) {
    return s;
  }
  return votes > 0;
}

void FakeReplicaContext::report(std::string_view metric, double value) {
  metrics_[std::string(metric)].emplace_back(step_, value);
}

absl::Status FakeReplicaContext::SyncVariables() {
  for (const auto& v : variables_) {
    if (absl::Status s = broadcast(v->tensor(), 0); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace cohort::examples::testing
