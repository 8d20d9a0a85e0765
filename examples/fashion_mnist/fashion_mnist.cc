// Fashion-MNIST (Debian's dataset-fashion-mnist): an MLP classifier of the
// 28x28 clothing images, 784 -> 256 -> 128 -> 10, trained with the runtime's
// Adam under any strategy, its matrix products done by OpenBLAS. The step
// reports the loss (MEAN over the replicas) and, every "eval_every" steps
// and at the last, the accuracy on the test set, which the replicas split.
// For the evaluator task: fmnist_eval over fmnist_test_data.

#include <cblas.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cohort/step.h"
#include "examples/fashion_mnist/fmnist_config.h"
#include "examples/fashion_mnist/fmnist_data.h"
#include "examples/fashion_mnist/fmnist_model.h"
#include "examples/fashion_mnist/idx_file.h"

namespace cohort::examples {
namespace {

// A replica's model and the test set, made by its init.
struct ReplicaState {
  FashionConfig config;
  std::vector<Variable*> variables;  // kernel, bias of each layer
  Optimizer* optimizer = nullptr;
  std::shared_ptr<const FashionMnistSplit> test;
  std::unique_ptr<FashionMlp> model;
  std::vector<std::vector<float>> gradients;  // one per variable

  std::vector<const float*> Params() const {
    std::vector<const float*> params;
    for (Variable* v : variables) params.push_back(v->data<float>());
    return params;
  }
};

// The test split of `dir`, read once per process and shared by its replicas.
absl::StatusOr<std::shared_ptr<const FashionMnistSplit>> TestSet(
    const std::string& dir) {
  static std::mutex mu;
  static auto* cache =
      new std::map<std::string, std::shared_ptr<const FashionMnistSplit>>();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache->find(dir); it != cache->end()) return it->second;
  absl::StatusOr<FashionMnistSplit> test = ReadFashionMnist(dir, "t10k");
  if (!test.ok()) return test.status();
  auto shared = std::make_shared<const FashionMnistSplit>(*std::move(test));
  cache->emplace(dir, shared);
  return shared;
}

absl::StatusOr<std::unique_ptr<Dataset>> FashionData(
    const InputContext& input) {
  return OpenFashionRecords(input, /*to_device=*/false);
}

absl::Status FashionInit(ReplicaContext& ctx) {
  if (ctx.device().is_cuda()) {
    return absl::FailedPreconditionError(
        "fmnist_init: this library computes on the host with OpenBLAS and "
        "needs CPU devices; this replica is on cuda:" +
        std::to_string(ctx.device().index));
  }
  absl::StatusOr<FashionConfig> config = ParseFashionConfig(ctx.config_json());
  if (!config.ok()) return config.status();
  openblas_set_num_threads(config->blas_threads);
  auto state = std::make_unique<ReplicaState>();
  state->config = *std::move(config);
  absl::StatusOr<std::shared_ptr<const FashionMnistSplit>> test =
      TestSet(state->config.source_dir);
  if (!test.ok()) return test.status();
  state->test = *std::move(test);
  absl::StatusOr<std::vector<Variable*>> variables =
      CreateFashionVariables(ctx, state->config, ctx.seed());
  if (!variables.ok()) return variables.status();
  state->variables = *std::move(variables);
  absl::StatusOr<Optimizer*> optimizer =
      ctx.create_optimizer({.kind = OptimizerKind::kAdam,
                            .learning_rate = state->config.learning_rate},
                           state->variables);
  if (!optimizer.ok()) return optimizer.status();
  state->optimizer = *optimizer;
  for (Variable* v : state->variables) state->gradients.emplace_back(v->count());
  state->model = std::make_unique<FashionMlp>(state->config);
  ctx.set_user_state(std::shared_ptr<ReplicaState>(std::move(state)));
  return absl::OkStatus();
}

ReplicaState* StateOf(ReplicaContext& ctx, const char* fn,
                      absl::Status& status) {
  ReplicaState* state = ctx.state<ReplicaState>();
  if (state == nullptr) {
    status = absl::FailedPreconditionError(
        std::string(fn) +
        ": no state for this replica; submit the job with --init=fmnist_init");
  }
  return state;
}

absl::Status FashionStep(ReplicaContext& ctx, const Batch& batch) {
  absl::Status status;
  ReplicaState* state = StateOf(ctx, "fmnist_step", status);
  if (state == nullptr) return status;
  if (batch.size() == 0) {
    return absl::InvalidArgumentError("fmnist_step: the batch is empty");
  }
  if (absl::Status s = state->model->Load(batch); !s.ok()) return s;
  const std::vector<const float*> params = state->Params();
  state->model->Forward(params);
  const double loss = state->model->Backward(params, state->gradients);
  std::vector<Tensor> gradients;
  for (std::vector<float>& g : state->gradients) {
    gradients.push_back({g.data(), g.size(), DType::kFloat32});
  }
  if (absl::Status s = state->optimizer->apply_gradients(gradients); !s.ok()) {
    return s;
  }
  ctx.report("loss", loss, ReduceOp::kMean);

  const int64_t every = state->config.eval_every;
  const bool last = ctx.step() == ctx.total_steps() - 1;
  if (last || (every > 0 && (ctx.step() + 1) % every == 0)) {
    // Each replica counts its block of the test set; the SUM over the
    // replicas is the accuracy.
    const int64_t count = std::min(state->config.test_examples, state->test->count);
    const int64_t correct = CountCorrect(
        *state->model, *state->test, count, ctx.replica_id_in_sync_group(),
        ctx.num_replicas_in_sync(), state->Params());
    ctx.report("accuracy", static_cast<double>(correct) / count, ReduceOp::kSum);
  }
  return absl::OkStatus();
}

// The evaluator's function: loss and accuracy of a batch of the test set.
absl::Status FashionEval(ReplicaContext& ctx, const Batch& batch) {
  absl::Status status;
  ReplicaState* state = StateOf(ctx, "fmnist_eval", status);
  if (state == nullptr) return status;
  if (absl::Status s = state->model->Load(batch); !s.ok()) return s;
  const std::vector<const float*> params = state->Params();
  state->model->Forward(params);
  const int64_t correct = state->model->Correct();
  ctx.report("loss", state->model->Backward(params, state->gradients));
  ctx.report("accuracy", static_cast<double>(correct) /
                             static_cast<double>(state->model->rows()));
  return absl::OkStatus();
}

// The evaluator's dataset: the test set.
absl::StatusOr<std::unique_ptr<Dataset>> FashionTestData(
    const InputContext& input) {
  absl::StatusOr<FashionConfig> config = ParseFashionConfig(input.config_json());
  if (!config.ok()) return config.status();
  absl::StatusOr<std::shared_ptr<const FashionMnistSplit>> test =
      TestSet(config->source_dir);
  if (!test.ok()) return test.status();
  std::vector<std::string> elements;
  const int64_t count = std::min(config->test_examples, (*test)->count);
  for (int64_t i = 0; i < count; ++i) {
    elements.push_back((*test)->examples.substr(
        static_cast<size_t>(i) * kExampleBytes, kExampleBytes));
  }
  return std::make_unique<InMemoryDataset>(std::move(elements),
                                           DatasetOptions{});
}

}  // namespace
}  // namespace cohort::examples

COHORT_REGISTER_DATASET("fmnist_data", cohort::examples::FashionData);
COHORT_REGISTER_DATASET("fmnist_test_data", cohort::examples::FashionTestData);
COHORT_REGISTER_INIT("fmnist_init", cohort::examples::FashionInit);
COHORT_REGISTER_STEP("fmnist_step", cohort::examples::FashionStep);
COHORT_REGISTER_STEP("fmnist_eval", cohort::examples::FashionEval);
