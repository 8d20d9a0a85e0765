// A small MLP classifier of two interleaved spirals, on CPU replicas (its
// layers split over the replica's logical devices when it has several): the
// forward and backward passes written out, the update left to the runtime's
// Adam (which all-reduces the gradients), and a held-out accuracy every
// "eval_every" steps. For the cluster's evaluator task it also has an eval
// function and an eval dataset (the held-out set), and for a client that
// schedules its own calls (ClusterCoordinator), a held-out evaluation call.

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cohort/step.h"
#include "examples/common/softmax_cross_entropy.h"
#include "examples/mlp/mlp_config.h"
#include "examples/mlp/mlp_model.h"

namespace cohort::examples {
namespace {

// A replica's model, held-out shard and scratch buffers, made by its init.
struct ReplicaState {
  MlpConfig config;
  std::array<MlpLayerShape, kMlpLayers> shape;
  // Where each layer's variables live and its work runs: with
  // logical_devices_per_replica > 1 the layers are split over the
  // replica's logical devices (model parallelism); else all on device 0.
  std::array<int, kMlpLayers> layer_device{};
  std::vector<Variable*> variables;  // kernel, bias of each layer
  Optimizer* optimizer = nullptr;
  std::vector<SpiralExample> held_out;
  std::vector<float> rows;  // the batch, [x0, x1, label] per example
  // Outputs of each layer: ReLU activations, then the logits.
  std::array<std::vector<float>, kMlpLayers> outputs;
  std::vector<std::vector<float>> gradients;  // one per variable
  std::vector<float> delta, delta_below;
};

// Runs the network on `rows` examples laid out as [x0, x1, label], each
// layer on its logical device; the logits end in state.outputs.back().
absl::Status Forward(ReplicaContext& ctx, ReplicaState& state,
                     const float* examples, size_t rows) {
  const float* in = examples;
  size_t stride = 3;
  for (int k = 0; k < kMlpLayers; ++k) {
    const MlpLayerShape& layer = state.shape[k];
    state.outputs[k].resize(rows * layer.out);
    absl::Status ran = ctx.run_on(state.layer_device[k], [&](const Device&) {
      MlpDense(in, stride, rows, state.variables[2 * k]->data<float>(),
               state.variables[2 * k + 1]->data<float>(), layer,
               k + 1 < kMlpLayers, state.outputs[k].data());
      return absl::OkStatus();
    });
    if (!ran.ok()) return ran;
    in = state.outputs[k].data();
    stride = static_cast<size_t>(layer.out);
  }
  return absl::OkStatus();
}

// The mean softmax cross-entropy of `rows` logits against the labels of
// state.rows, and its gradient with respect to the logits into state.delta.
double LossAndDelta(ReplicaState& state, size_t rows) {
  const std::vector<float>& logits = state.outputs.back();
  state.delta.resize(rows * kMlpClasses);
  double loss = 0;
  for (size_t b = 0; b < rows; ++b) {
    loss += SoftmaxCrossEntropy(&logits[b * kMlpClasses], kMlpClasses,
                                static_cast<int>(state.rows[3 * b + 2]),
                                &state.delta[b * kMlpClasses],
                                static_cast<double>(rows));
  }
  return loss / static_cast<double>(rows);
}

// Layer k's gradients from state.delta (its outputs' gradient), then, below
// the first layer, the gradient of its inputs into state.delta.
void Backward(ReplicaState& state, int k, size_t rows) {
  const MlpLayerShape& layer = state.shape[k];
  const float* in = k == 0 ? state.rows.data() : state.outputs[k - 1].data();
  const size_t stride = k == 0 ? 3 : static_cast<size_t>(layer.in);
  std::vector<float>& dkernel = state.gradients[2 * k];
  std::vector<float>& dbias = state.gradients[2 * k + 1];
  std::fill(dkernel.begin(), dkernel.end(), 0.0f);
  std::fill(dbias.begin(), dbias.end(), 0.0f);
  for (size_t b = 0; b < rows; ++b) {
    const float* d = &state.delta[b * layer.out];
    for (int i = 0; i < layer.in; ++i) {
      const float x = in[b * stride + i];
      float* g = &dkernel[static_cast<size_t>(i) * layer.out];
      for (int j = 0; j < layer.out; ++j) g[j] += x * d[j];
    }
    for (int j = 0; j < layer.out; ++j) dbias[j] += d[j];
  }
  if (k == 0) return;
  // Back through the kernel, then through the ReLU below it.
  const float* kernel = state.variables[2 * k]->data<float>();
  state.delta_below.assign(rows * layer.in, 0.0f);
  for (size_t b = 0; b < rows; ++b) {
    const float* d = &state.delta[b * layer.out];
    for (int i = 0; i < layer.in; ++i) {
      if (in[b * stride + i] <= 0) continue;
      const float* w = kernel + static_cast<size_t>(i) * layer.out;
      float sum = 0;
      for (int j = 0; j < layer.out; ++j) sum += w[j] * d[j];
      state.delta_below[b * layer.in + i] = sum;
    }
  }
  std::swap(state.delta, state.delta_below);
}

// Mean softmax cross-entropy of the batch in state.rows, and its gradients
// with respect to every variable into state.gradients; each layer's work on
// its logical device.
absl::StatusOr<double> ForwardBackward(ReplicaContext& ctx,
                                       ReplicaState& state) {
  const size_t rows = state.rows.size() / 3;
  if (absl::Status s = Forward(ctx, state, state.rows.data(), rows); !s.ok()) {
    return s;
  }
  double loss = 0;
  absl::Status s =
      ctx.run_on(state.layer_device[kMlpLayers - 1], [&](const Device&) {
        loss = LossAndDelta(state, rows);
        return absl::OkStatus();
      });
  for (int k = kMlpLayers - 1; s.ok() && k >= 0; --k) {
    s = ctx.run_on(state.layer_device[k], [&](const Device&) {
      Backward(state, k, rows);
      return absl::OkStatus();
    });
  }
  if (!s.ok()) return s;
  return loss;
}

// This replica's share of the held-out accuracy: the examples of its shard
// that it classifies right, over all held-out examples. Summed over the
// replicas, it is the accuracy.
absl::StatusOr<double> HeldOutAccuracyShare(ReplicaContext& ctx,
                                            ReplicaState& state) {
  const size_t rows = state.held_out.size();
  double correct = 0;
  if (rows > 0) {
    if (absl::Status s =
            Forward(ctx, state, state.held_out.front().data(), rows);
        !s.ok()) {
      return s;
    }
    const std::vector<float>& logits = state.outputs.back();
    for (size_t b = 0; b < rows; ++b) {
      correct += MlpPredictedClass(&logits[2 * b]) ==
                 static_cast<int>(state.held_out[b][2]);
    }
  }
  return correct / static_cast<double>(state.config.eval_examples);
}

absl::Status MlpInit(ReplicaContext& ctx) {
  if (ctx.device().is_cuda()) {
    return absl::FailedPreconditionError(
        "mlp_init: this library computes on the host and needs CPU devices, "
        "and this replica is on cuda:" +
        std::to_string(ctx.device().index) +
        "; use libcohort_example_mlp_cuda.so (mlp_cuda_init, "
        "mlp_cuda_step) on GPUs");
  }
  absl::StatusOr<MlpConfig> config = ParseMlpConfig(ctx.config_json());
  if (!config.ok()) return config.status();
  auto state = std::make_unique<ReplicaState>();
  state->config = *std::move(config);
  state->shape = MlpShape(state->config.hidden);
  for (int k = 0; k < kMlpLayers; ++k) {
    state->layer_device[k] = MlpLayerDevice(k, ctx.num_logical_devices());
  }
  absl::StatusOr<std::vector<Variable*>> variables =
      CreateMlpVariables(ctx, state->config.hidden, /*split=*/true);
  if (!variables.ok()) return variables.status();
  state->variables = *std::move(variables);
  absl::StatusOr<Optimizer*> optimizer =
      ctx.create_optimizer({.kind = OptimizerKind::kAdam,
                            .learning_rate = state->config.learning_rate},
                           state->variables);
  if (!optimizer.ok()) return optimizer.status();
  state->optimizer = *optimizer;
  for (Variable* v : state->variables)
    state->gradients.emplace_back(v->count());
  state->held_out =
      HeldOutShard(state->config, ctx.seed(), ctx.replica_id_in_sync_group(),
                   ctx.num_replicas_in_sync());
  ctx.set_user_state(std::shared_ptr<ReplicaState>(std::move(state)));
  return absl::OkStatus();
}

absl::Status MlpStep(ReplicaContext& ctx, const Batch& batch) {
  ReplicaState* state = ctx.state<ReplicaState>();
  if (state == nullptr) {
    return absl::FailedPreconditionError(
        "mlp_step: no state for this replica; submit the job with "
        "--init=mlp_init");
  }
  if (batch.size() == 0) {
    return absl::InvalidArgumentError("mlp_step: the batch is empty");
  }
  if (absl::Status s = PackSpiralBatch(batch, "mlp_step", state->rows);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<double> loss = ForwardBackward(ctx, *state);
  if (!loss.ok()) return loss.status();

  std::vector<Tensor> gradients;
  for (std::vector<float>& g : state->gradients) {
    gradients.push_back({g.data(), g.size(), DType::kFloat32});
  }
  if (absl::Status s = state->optimizer->apply_gradients(gradients); !s.ok()) {
    return s;
  }
  // Reduced over the replicas by the runtime at the end of the step, as
  // strategy.reduce(MEAN, per_replica_loss) would.
  ctx.report("loss", *loss, ReduceOp::kMean);

  const bool last = ctx.step() == ctx.total_steps() - 1;
  if (last || (ctx.step() + 1) % state->config.eval_every == 0) {
    absl::StatusOr<double> share = HeldOutAccuracyShare(ctx, *state);
    if (!share.ok()) return share.status();
    ctx.report("accuracy", *share, ReduceOp::kSum);
  }
  return absl::OkStatus();
}

// The evaluator's function: the loss and accuracy of one batch of the
// held-out set, with the variables of the checkpoint being evaluated.
absl::Status MlpEval(ReplicaContext& ctx, const Batch& batch) {
  ReplicaState* state = ctx.state<ReplicaState>();
  if (state == nullptr) {
    return absl::FailedPreconditionError(
        "mlp_eval: no state; submit the job with --init=mlp_init");
  }
  if (absl::Status s = PackSpiralBatch(batch, "mlp_eval", state->rows);
      !s.ok()) {
    return s;
  }
  const size_t rows = state->rows.size() / 3;
  if (absl::Status s = Forward(ctx, *state, state->rows.data(), rows);
      !s.ok()) {
    return s;
  }
  const std::vector<float>& logits = state->outputs.back();
  double loss = 0, correct = 0;
  for (size_t b = 0; b < rows; ++b) {
    const float* z = &logits[b * kMlpClasses];
    const int label = static_cast<int>(state->rows[3 * b + 2]);
    loss += SoftmaxCrossEntropy(z, kMlpClasses, label);
    correct += MlpPredictedClass(z) == label;
  }
  ctx.report("loss", loss / static_cast<double>(rows));
  ctx.report("accuracy", correct / static_cast<double>(rows));
  return absl::OkStatus();
}

// A call scheduled from the client between training calls
// (cohort-example-ps-schedule): the held-out accuracy of the variables as
// this call pulled them, tagged with args[0], the training step it follows.
absl::Status MlpHeldOut(ReplicaContext& ctx, const Batch&) {
  ReplicaState* state = ctx.state<ReplicaState>();
  if (state == nullptr) {
    return absl::FailedPreconditionError(
        "mlp_held_out: no state; submit the job with --init=mlp_init");
  }
  if (ctx.num_replicas_in_sync() != 1) {
    return absl::FailedPreconditionError(
        "mlp_held_out: a call scheduled from the client runs on one replica "
        "(ParameterServer with ps.schedule_from_client)");
  }
  absl::StatusOr<double> accuracy = HeldOutAccuracyShare(ctx, *state);
  if (!accuracy.ok()) return accuracy.status();
  ctx.report("accuracy", *accuracy);
  ctx.report("after_step", ctx.args().empty() ? -1 : ctx.args()[0]);
  return absl::OkStatus();
}

// The evaluator's dataset: the whole held-out set.
absl::StatusOr<std::unique_ptr<Dataset>> MlpEvalData(
    const InputContext& input) {
  absl::StatusOr<MlpConfig> config = ParseMlpConfig(input.config_json());
  if (!config.ok()) return config.status();
  std::vector<std::string> elements;
  for (const SpiralExample& e : HeldOutShard(*config, input.seed(), 0, 1)) {
    elements.push_back(EncodeSpiralExample(e));
  }
  return std::make_unique<InMemoryDataset>(std::move(elements),
                                           DatasetOptions{});
}

}  // namespace
}  // namespace cohort::examples

COHORT_REGISTER_DATASET("mlp_data", cohort::examples::OpenSpiralRecords);
COHORT_REGISTER_DATASET("mlp_eval_data", cohort::examples::MlpEvalData);
COHORT_REGISTER_STEP("mlp_eval", cohort::examples::MlpEval);
COHORT_REGISTER_STEP("mlp_held_out", cohort::examples::MlpHeldOut);
COHORT_REGISTER_INIT("mlp_init", cohort::examples::MlpInit);
COHORT_REGISTER_STEP("mlp_step", cohort::examples::MlpStep);
