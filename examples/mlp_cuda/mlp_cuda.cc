// The MLP example on CUDA replicas: the same network, data and names as
// examples/mlp with the prefix "mlp_cuda_", computed on the replica's device
// and stream by CudaMlp (cuBLAS and mlp_kernels.cu), the update left to the
// runtime's Adam on device tensors.

#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cohort/step.h"
#include "examples/mlp/mlp_config.h"
#include "examples/mlp/mlp_model.h"
#include "examples/mlp_cuda/cuda_mlp.h"

namespace cohort::examples {
namespace {

// A step library sees only the public headers, which have no such macro.
#define MLP_CUDA_RETURN_IF_ERROR(expr) \
  do {                                 \
    absl::Status _status = (expr);     \
    if (!_status.ok()) return _status; \
  } while (false)

absl::Status Cuda(cudaError_t error, const char* what) {
  return CudaStatus(error, std::string("mlp_cuda: ") + what);
}

// Spiral examples are float32 rows [x0, x1, label].
constexpr int kRowFloats = 3;
constexpr int kLabelColumn = 2;

// A replica's model, held-out shard and device buffers, made by its init.
// Used from its replica's thread only.
struct ReplicaState {
  int device = 0;
  cudaStream_t stream = nullptr;  // the runtime's
  MlpConfig config;
  std::vector<Variable*> variables;  // kernel, bias of each layer
  Optimizer* optimizer = nullptr;
  std::unique_ptr<CudaMlp> mlp;
  int held_out_rows = 0;
  DeviceFloats held_out;   // [held_out_rows, 3]
  DeviceFloats scalar;  // the loss, or the count of correct predictions
  int batch_capacity = 0;
  DeviceFloats batch;  // [rows, 3]
  std::vector<float> host_rows;
};

// s.scalar all-reduced with `op`, read back to the host.
absl::StatusOr<float> ReduceScalar(ReplicaContext& ctx, ReplicaState& s,
                                   ReduceOp op) {
  MLP_CUDA_RETURN_IF_ERROR(
      ctx.all_reduce(op, {s.scalar.get(), 1, DType::kFloat32}));
  float value = 0;
  MLP_CUDA_RETURN_IF_ERROR(
      Cuda(cudaMemcpyAsync(&value, s.scalar.get(), sizeof(float),
                           cudaMemcpyDeviceToHost, s.stream),
           "copy to host"));
  MLP_CUDA_RETURN_IF_ERROR(
      Cuda(cudaStreamSynchronize(s.stream), "stream synchronize"));
  return value;
}

// Held-out accuracy: each replica scores its shard, one all-reduce sums.
absl::StatusOr<double> HeldOutAccuracy(ReplicaContext& ctx, ReplicaState& s) {
  MLP_CUDA_RETURN_IF_ERROR(s.mlp->CountCorrect(
      s.held_out.get(), kRowFloats, s.held_out.get() + kLabelColumn,
      kRowFloats, s.held_out_rows, s.scalar.get()));
  absl::StatusOr<float> correct = ReduceScalar(ctx, s, ReduceOp::kSum);
  if (!correct.ok()) return correct.status();
  return *correct / static_cast<double>(s.config.eval_examples);
}

absl::Status SetUp(ReplicaContext& ctx, ReplicaState& s) {
  s.device = ctx.device().index;
  s.stream = static_cast<cudaStream_t>(ctx.device().stream);
  MLP_CUDA_RETURN_IF_ERROR(Cuda(cudaSetDevice(s.device), "cudaSetDevice"));
  absl::StatusOr<MlpConfig> config = ParseMlpConfig(ctx.config_json());
  if (!config.ok()) return config.status();
  s.config = *std::move(config);

  absl::StatusOr<std::vector<Variable*>> variables =
      CreateMlpVariables(ctx, s.config.hidden);
  if (!variables.ok()) return variables.status();
  s.variables = *std::move(variables);
  absl::StatusOr<Optimizer*> optimizer = ctx.create_optimizer(
      {.kind = OptimizerKind::kAdam, .learning_rate = s.config.learning_rate},
      s.variables);
  if (!optimizer.ok()) return optimizer.status();
  s.optimizer = *optimizer;
  std::vector<CudaMlp::Layer> layers;
  for (const MlpLayerShape& shape : MlpShape(s.config.hidden)) {
    layers.push_back({shape.in, shape.out});
  }
  absl::StatusOr<std::unique_ptr<CudaMlp>> mlp =
      CudaMlp::Create(ctx.device(), std::move(layers), s.variables);
  if (!mlp.ok()) return mlp.status();
  s.mlp = *std::move(mlp);

  MLP_CUDA_RETURN_IF_ERROR(AllocateFloats(1, s.scalar));

  const std::vector<SpiralExample> held_out =
      HeldOutShard(s.config, ctx.seed(), ctx.replica_id_in_sync_group(),
                   ctx.num_replicas_in_sync());
  s.held_out_rows = static_cast<int>(held_out.size());
  MLP_CUDA_RETURN_IF_ERROR(
      AllocateFloats(kRowFloats * held_out.size(), s.held_out));
  MLP_CUDA_RETURN_IF_ERROR(
      Cuda(cudaMemcpyAsync(s.held_out.get(), held_out.data(),
                           held_out.size() * kSpiralExampleBytes,
                           cudaMemcpyHostToDevice, s.stream),
           "copy the held-out set"));
  // The host copy goes out of scope here.
  return Cuda(cudaStreamSynchronize(s.stream), "stream synchronize");
}

absl::Status MlpCudaInit(ReplicaContext& ctx) {
  if (!ctx.device().is_cuda()) {
    return absl::FailedPreconditionError(
        "mlp_cuda_init: this library needs a CUDA device, and this replica "
        "is on cpu:" +
        std::to_string(ctx.device().index) +
        "; use libcohort_example_mlp.so (mlp_init, mlp_step) on CPU devices");
  }
  auto state = std::make_unique<ReplicaState>();
  MLP_CUDA_RETURN_IF_ERROR(SetUp(ctx, *state));
  ctx.set_user_state(std::shared_ptr<ReplicaState>(std::move(state)));
  return absl::OkStatus();
}

absl::Status MlpCudaStep(ReplicaContext& ctx, const Batch& batch) {
  ReplicaState* s = ctx.state<ReplicaState>();
  if (s == nullptr) {
    return absl::FailedPreconditionError(
        "mlp_cuda_step: no state for this replica; submit the job with "
        "--init=mlp_cuda_init");
  }
  if (batch.size() == 0) {
    return absl::InvalidArgumentError("mlp_cuda_step: the batch is empty");
  }
  MLP_CUDA_RETURN_IF_ERROR(
      PackSpiralBatch(batch, "mlp_cuda_step", s->host_rows));
  const int rows = static_cast<int>(batch.size());
  MLP_CUDA_RETURN_IF_ERROR(Cuda(cudaSetDevice(s->device), "cudaSetDevice"));
  if (rows > s->batch_capacity) {
    MLP_CUDA_RETURN_IF_ERROR(AllocateFloats(kRowFloats * rows, s->batch));
    s->batch_capacity = rows;
  }
  // mlp_cuda_data prefetches the batch, packed as these rows, into device
  // memory while the previous step runs; the copy here stays on the device.
  const bool on_device = batch.device_data() != nullptr;
  MLP_CUDA_RETURN_IF_ERROR(Cuda(
      cudaMemcpyAsync(s->batch.get(),
                      on_device ? batch.device_data() : s->host_rows.data(),
                      s->host_rows.size() * sizeof(float),
                      on_device ? cudaMemcpyDeviceToDevice
                                : cudaMemcpyHostToDevice,
                      s->stream),
      "copy the batch"));
  MLP_CUDA_RETURN_IF_ERROR(s->mlp->ForwardBackward(
      s->batch.get(), kRowFloats, s->batch.get() + kLabelColumn, kRowFloats,
      rows, s->scalar.get()));
  MLP_CUDA_RETURN_IF_ERROR(s->optimizer->apply_gradients(s->mlp->gradients()));
  absl::StatusOr<float> loss = ReduceScalar(ctx, *s, ReduceOp::kMean);
  if (!loss.ok()) return loss.status();
  ctx.report("loss", *loss);

  const bool last = ctx.step() == ctx.total_steps() - 1;
  if (last || (ctx.step() + 1) % s->config.eval_every == 0) {
    absl::StatusOr<double> accuracy = HeldOutAccuracy(ctx, *s);
    if (!accuracy.ok()) return accuracy.status();
    ctx.report("accuracy", *accuracy);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace cohort::examples

COHORT_REGISTER_DATASET("mlp_cuda_data",
                        cohort::examples::OpenSpiralRecordsToDevice);
COHORT_REGISTER_INIT("mlp_cuda_init", cohort::examples::MlpCudaInit);
COHORT_REGISTER_STEP("mlp_cuda_step", cohort::examples::MlpCudaStep);
