// Linear regression y = w·x + b by data-parallel gradient descent, on
// generated data with known weights: the smallest step library that really
// trains, and a check of the runtime's all-reduce and optimizers. float64
// throughout, so that runs with different replica counts agree closely.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cohort/step.h"
#include "examples/linear_regression/linear_config.h"

namespace cohort::examples {
namespace {

// What a replica's step needs from its init.
struct ReplicaState {
  LinearConfig config;
  Variable* w = nullptr;
  Variable* b = nullptr;
  Optimizer* optimizer = nullptr;
  std::vector<double> gradient;  // dw..., db
};

absl::Status NeedCpu(const ReplicaContext& ctx, const char* fn) {
  if (!ctx.device().is_cuda()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      std::string(fn) +
      ": this example computes on the host and needs CPU devices, and "
      "this replica is on cuda:" +
      std::to_string(ctx.device().index) +
      "; run its agents with CUDA_VISIBLE_DEVICES= to get CPU devices");
}

DatasetOptions InputOptionsOf(const LinearConfig& config) {
  return {.shard_policy = config.shard_policy,
          .shuffle = config.shuffle,
          .prefetch_steps = config.prefetch_steps,
          .prefetch_to_device = config.prefetch_to_device};
}

absl::StatusOr<std::unique_ptr<Dataset>> LinearData(const InputContext& input) {
  absl::StatusOr<LinearConfig> config = ParseLinearConfig(input.config_json());
  if (!config.ok()) return config.status();
  return std::make_unique<InMemoryDataset>(
      GenerateLinearData(*config, input.seed()), InputOptionsOf(*config));
}

// The same examples as linear_data, generated as they are read: endless,
// or config.stream_examples of them.
class LinearStream final : public DataStream {
 public:
  LinearStream(LinearConfig config, uint64_t seed)
      : config_(std::move(config)), examples_(config_, seed) {}

  absl::StatusOr<bool> Next(std::string* element) override {
    if (config_.stream_examples > 0 && read_ == config_.stream_examples) {
      return false;
    }
    *element = examples_.Next();
    ++read_;
    return true;
  }
  DatasetOptions options() const override { return InputOptionsOf(config_); }

 private:
  const LinearConfig config_;
  LinearExamples examples_;
  int64_t read_ = 0;
};

absl::StatusOr<std::unique_ptr<DataStream>> LinearStreamFn(
    const InputContext& input) {
  absl::StatusOr<LinearConfig> config = ParseLinearConfig(input.config_json());
  if (!config.ok()) return config.status();
  return std::make_unique<LinearStream>(*std::move(config), input.seed());
}

absl::Status LinearInit(ReplicaContext& ctx) {
  if (absl::Status s = NeedCpu(ctx, "linear_init"); !s.ok()) return s;
  absl::StatusOr<LinearConfig> config = ParseLinearConfig(ctx.config_json());
  if (!config.ok()) return config.status();
  auto state = std::make_unique<ReplicaState>();
  state->config = *std::move(config);
  const int dim = state->config.dim;
  state->gradient.resize(static_cast<size_t>(dim) + 1);

  absl::StatusOr<Variable*> w = ctx.create_variable(
      {.name = "w", .shape = {dim}, .dtype = DType::kFloat64}, nullptr);
  if (!w.ok()) return w.status();
  absl::StatusOr<Variable*> b = ctx.create_variable(
      {.name = "b", .shape = {1}, .dtype = DType::kFloat64}, nullptr);
  if (!b.ok()) return b.status();
  absl::StatusOr<Optimizer*> optimizer =
      ctx.create_optimizer(state->config.optimizer, {*w, *b});
  if (!optimizer.ok()) return optimizer.status();
  state->w = *w;
  state->b = *b;
  state->optimizer = *optimizer;
  ctx.set_user_state(std::shared_ptr<ReplicaState>(std::move(state)));
  return absl::OkStatus();
}

absl::Status LinearStep(ReplicaContext& ctx, const Batch& batch) {
  ReplicaState* state = ctx.state<ReplicaState>();
  if (state == nullptr) {
    return absl::FailedPreconditionError(
        "linear_step: no state for this replica; submit the job with "
        "--init=linear_init");
  }
  const std::string& until = state->config.step_sleep_until_file;
  std::error_code unreadable;  // a path that cannot be read is not there
  if (state->config.step_sleep_ms > 0 &&
      (until.empty() || !std::filesystem::exists(until, unreadable))) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(state->config.step_sleep_ms));
  }
  if (ctx.step() == state->config.hang_at_step) {
    std::fprintf(stderr, "linear_step: step %lld hangs (hang_at_step)\n",
                 static_cast<long long>(ctx.step()));
    std::fflush(stderr);
    while (true) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  const size_t dim = static_cast<size_t>(state->config.dim);
  if (batch.size() == 0) {
    return absl::InvalidArgumentError("linear_step: the batch is empty");
  }
  const double* w = state->w->data<double>();
  const double b = *state->b->data<double>();
  std::vector<double>& gradient = state->gradient;
  std::fill(gradient.begin(), gradient.end(), 0.0);

  // Mean squared error over this replica's batch; the optimizer averages
  // the gradients over the replicas, which equal shares make the gradient
  // of the global batch.
  double loss = 0;
  // With prefetch_to_device the batch also sits packed in the replica's
  // memory (host memory on a CPU device): read it there.
  const double* packed = batch.device_as<double>();
  for (size_t n = 0; n < batch.size(); ++n) {
    if (batch.element(n).size() != (dim + 1) * sizeof(double)) {
      return absl::InvalidArgumentError(
          "linear_step: an element of " +
          std::to_string(batch.element(n).size()) + " bytes, expected " +
          std::to_string(dim + 1) +
          " float64 values (\"dim\" + 1); is the "
          "data set linear_data with the same config?");
    }
    const double* e =
        packed != nullptr ? packed + n * (dim + 1) : batch.As<double>(n).data();
    double error = b - e[dim];
    for (size_t i = 0; i < dim; ++i) error += w[i] * e[i];
    loss += error * error;
    for (size_t i = 0; i < dim; ++i) gradient[i] += 2 * error * e[i];
    gradient[dim] += 2 * error;
  }
  const double scale = 1.0 / static_cast<double>(batch.size());
  loss *= scale;
  for (double& g : gradient) g *= scale;

  const Tensor gradients[] = {{gradient.data(), dim, DType::kFloat64},
                              {gradient.data() + dim, 1, DType::kFloat64}};
  if (absl::Status s = state->optimizer->apply_gradients(gradients); !s.ok()) {
    return s;
  }
  // Reduced with the step's other metrics, in one collective, and seen by
  // an early-stopping rule on "loss".
  ctx.report("loss", loss, ReduceOp::kMean);

  if (ctx.step() == ctx.total_steps() - 1) {
    double max_error =
        std::abs(*state->b->data<double>() - state->config.true_b);
    for (size_t i = 0; i < dim; ++i) {
      max_error = std::max(max_error, std::abs(state->w->data<double>()[i] -
                                               state->config.true_w[i]));
    }
    ctx.report("max_weight_error", max_error);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace cohort::examples

COHORT_REGISTER_DATASET("linear_data", cohort::examples::LinearData);
COHORT_REGISTER_STREAM("linear_stream", cohort::examples::LinearStreamFn);
COHORT_REGISTER_INIT("linear_init", cohort::examples::LinearInit);
COHORT_REGISTER_STEP("linear_step", cohort::examples::LinearStep);
