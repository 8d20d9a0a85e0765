// The MLP example on CUDA replicas: the same network, data and names as
// examples/mlp with the prefix "mlp_cuda_", computed on the replica's device
// and stream: cuBLAS for the matrix products, the kernels of mlp_kernels.cu
// for the rest, the runtime's Adam on device tensors for the update.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cohort/step.h"
#include "examples/mlp/mlp_config.h"
#include "examples/mlp/mlp_model.h"
#include "examples/mlp_cuda/mlp_kernels.h"

namespace cohort::examples {
namespace {

absl::Status Cuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message =
      std::string("mlp_cuda: ") + what + ": " + cudaGetErrorString(error);
  return error == cudaErrorMemoryAllocation
             ? absl::ResourceExhaustedError(message)
             : absl::InternalError(message);
}

absl::Status Cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(std::string("mlp_cuda: ") + what + ": " +
                             cublasGetStatusString(status));
}

// A step library sees only the public headers, which have no such macro.
#define MLP_CUDA_RETURN_IF_ERROR(expr) \
  do {                                 \
    absl::Status _status = (expr);     \
    if (!_status.ok()) return _status; \
  } while (false)

struct CudaFree {
  void operator()(float* p) const { cudaFree(p); }
};
using DeviceFloats = std::unique_ptr<float, CudaFree>;

absl::Status Allocate(size_t count, DeviceFloats& out) {
  float* p = nullptr;
  MLP_CUDA_RETURN_IF_ERROR(
      Cuda(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(float)),
           "cudaMalloc"));
  out.reset(p);
  return absl::OkStatus();
}

// A replica's model, held-out shard and device buffers, made by its init.
// Used from its replica's thread only.
struct ReplicaState {
  ~ReplicaState() {
    // Frees on the replica's device.
    cudaSetDevice(device);
    if (cublas != nullptr) cublasDestroy(cublas);
  }

  int device = 0;
  cudaStream_t stream = nullptr;  // the runtime's
  cublasHandle_t cublas = nullptr;
  MlpConfig config;
  std::array<MlpLayerShape, kMlpLayers> shape;
  std::vector<Variable*> variables;  // kernel, bias of each layer
  Optimizer* optimizer = nullptr;
  int held_out_rows = 0;
  DeviceFloats held_out;   // [held_out_rows, 3]
  DeviceFloats gradients;  // every variable's, back to back
  std::vector<Tensor> gradient_tensors;
  DeviceFloats scalar;  // the loss, or the count of correct predictions
  // Buffers of `capacity` rows: the batch, each layer's output, the
  // gradient flowing back, per-row values (losses or hits).
  int capacity = 0;
  DeviceFloats batch;
  std::array<DeviceFloats, kMlpLayers> outputs;
  DeviceFloats delta, delta_below, per_row;
  std::vector<float> host_rows;
};


absl::Status Reserve(ReplicaState& s, int rows) {
  if (rows <= s.capacity) return absl::OkStatus();
  const int widest = std::max(s.config.hidden, kMlpClasses);
  const size_t n = static_cast<size_t>(rows);
  MLP_CUDA_RETURN_IF_ERROR(Allocate(3 * n, s.batch));
  for (int k = 0; k < kMlpLayers; ++k) {
    MLP_CUDA_RETURN_IF_ERROR(Allocate(n * s.shape[k].out, s.outputs[k]));
  }
  MLP_CUDA_RETURN_IF_ERROR(Allocate(n * widest, s.delta));
  MLP_CUDA_RETURN_IF_ERROR(Allocate(n * widest, s.delta_below));
  MLP_CUDA_RETURN_IF_ERROR(Allocate(n, s.per_row));
  s.capacity = rows;
  return absl::OkStatus();
}

// Row-major out = in · kernel is column-major out^T = kernel^T · in^T, which
// is how cuBLAS sees the same memory: no transposes needed.
absl::Status Forward(ReplicaState& s, const float* examples, int rows) {
  if (rows == 0) return absl::OkStatus();
  const float one = 1, zero = 0;
  const float* in = examples;
  int ld = 3;  // examples are [x0, x1, label]
  for (int k = 0; k < kMlpLayers; ++k) {
    const MlpLayerShape& layer = s.shape[k];
    MLP_CUDA_RETURN_IF_ERROR(Cublas(
        cublasSgemm(s.cublas, CUBLAS_OP_N, CUBLAS_OP_N, layer.out, rows,
                    layer.in, &one, s.variables[2 * k]->data<float>(),
                    layer.out, in, ld, &zero, s.outputs[k].get(), layer.out),
        "forward sgemm"));
    MLP_CUDA_RETURN_IF_ERROR(
        Cuda(cuda::BiasActivation(s.outputs[k].get(),
                                  s.variables[2 * k + 1]->data<float>(), rows,
                                  layer.out, k + 1 < kMlpLayers, s.stream),
             "bias and activation"));
    in = s.outputs[k].get();
    ld = layer.out;
  }
  return absl::OkStatus();
}

// Gradients of the mean loss of the batch into s.gradients, the mean loss
// into s.scalar.
absl::Status ForwardBackward(ReplicaState& s, int rows) {
  MLP_CUDA_RETURN_IF_ERROR(Forward(s, s.batch.get(), rows));
  MLP_CUDA_RETURN_IF_ERROR(
      Cuda(cuda::SoftmaxCrossEntropy(s.outputs.back().get(), s.batch.get(),
                                     rows, kMlpClasses, s.per_row.get(),
                                     s.delta.get(), s.stream),
           "softmax cross-entropy"));
  MLP_CUDA_RETURN_IF_ERROR(
      Cuda(cuda::Sum(s.per_row.get(), rows, 1.0f / static_cast<float>(rows),
                     s.scalar.get(), s.stream),
           "loss sum"));
  const float one = 1, zero = 0;
  for (int k = kMlpLayers - 1; k >= 0; --k) {
    const MlpLayerShape& layer = s.shape[k];
    const float* in = k == 0 ? s.batch.get() : s.outputs[k - 1].get();
    const int ld = k == 0 ? 3 : layer.in;
    float* dkernel = s.gradient_tensors[2 * k].as<float>();
    float* dbias = s.gradient_tensors[2 * k + 1].as<float>();
    // dkernel = in^T · delta; column-major: delta^T · in.
    MLP_CUDA_RETURN_IF_ERROR(
        Cublas(cublasSgemm(s.cublas, CUBLAS_OP_N, CUBLAS_OP_T, layer.out,
                           layer.in, rows, &one, s.delta.get(), layer.out, in,
                           ld, &zero, dkernel, layer.out),
               "kernel gradient sgemm"));
    MLP_CUDA_RETURN_IF_ERROR(
        Cuda(cuda::ColumnSums(s.delta.get(), rows, layer.out, dbias, s.stream),
             "bias gradient"));
    if (k == 0) break;
    // delta_below = delta · kernel^T, then back through the ReLU.
    MLP_CUDA_RETURN_IF_ERROR(
        Cublas(cublasSgemm(s.cublas, CUBLAS_OP_T, CUBLAS_OP_N, layer.in, rows,
                           layer.out, &one, s.variables[2 * k]->data<float>(),
                           layer.out, s.delta.get(), layer.out, &zero,
                           s.delta_below.get(), layer.in),
               "backward sgemm"));
    MLP_CUDA_RETURN_IF_ERROR(
        Cuda(cuda::ReluGrad(s.delta_below.get(), s.outputs[k - 1].get(),
                            rows * layer.in, s.stream),
             "relu gradient"));
    std::swap(s.delta, s.delta_below);
  }
  return absl::OkStatus();
}

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
  MLP_CUDA_RETURN_IF_ERROR(Forward(s, s.held_out.get(), s.held_out_rows));
  MLP_CUDA_RETURN_IF_ERROR(Cuda(
      cuda::Correct(s.outputs.back().get(), s.held_out.get(), s.held_out_rows,
                    kMlpClasses, s.per_row.get(), s.stream),
      "correct"));
  MLP_CUDA_RETURN_IF_ERROR(Cuda(cuda::Sum(s.per_row.get(), s.held_out_rows,
                                          1.0f, s.scalar.get(), s.stream),
                                "correct sum"));
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
  s.shape = MlpShape(s.config.hidden);

  absl::StatusOr<std::vector<Variable*>> variables =
      CreateMlpVariables(ctx, s.config.hidden);
  if (!variables.ok()) return variables.status();
  s.variables = *std::move(variables);
  absl::StatusOr<Optimizer*> optimizer = ctx.create_optimizer(
      {.kind = OptimizerKind::kAdam, .learning_rate = s.config.learning_rate},
      s.variables);
  if (!optimizer.ok()) return optimizer.status();
  s.optimizer = *optimizer;

  size_t total = 0;
  for (Variable* v : s.variables) total += v->count();
  MLP_CUDA_RETURN_IF_ERROR(Allocate(total, s.gradients));
  size_t offset = 0;
  for (Variable* v : s.variables) {
    s.gradient_tensors.push_back(
        {s.gradients.get() + offset, v->count(), DType::kFloat32});
    offset += v->count();
  }
  MLP_CUDA_RETURN_IF_ERROR(Allocate(1, s.scalar));

  const std::vector<SpiralExample> held_out =
      HeldOutShard(s.config, ctx.seed(), ctx.replica_id_in_sync_group(),
                   ctx.num_replicas_in_sync());
  s.held_out_rows = static_cast<int>(held_out.size());
  MLP_CUDA_RETURN_IF_ERROR(Allocate(3 * held_out.size(), s.held_out));
  MLP_CUDA_RETURN_IF_ERROR(
      Cuda(cudaMemcpyAsync(s.held_out.get(), held_out.data(),
                           held_out.size() * kSpiralExampleBytes,
                           cudaMemcpyHostToDevice, s.stream),
           "copy the held-out set"));
  // The host copy goes out of scope here.
  MLP_CUDA_RETURN_IF_ERROR(
      Cuda(cudaStreamSynchronize(s.stream), "stream synchronize"));

  MLP_CUDA_RETURN_IF_ERROR(Cublas(cublasCreate(&s.cublas), "cublasCreate"));
  MLP_CUDA_RETURN_IF_ERROR(
      Cublas(cublasSetStream(s.cublas, s.stream), "cublasSetStream"));
  const int64_t per_replica =
      ctx.global_batch_size() / std::max(ctx.num_replicas_in_sync(), 1);
  return Reserve(
      s, static_cast<int>(std::max<int64_t>(per_replica, s.held_out_rows)));
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
  MLP_CUDA_RETURN_IF_ERROR(Reserve(*s, rows));
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
  MLP_CUDA_RETURN_IF_ERROR(ForwardBackward(*s, rows));
  MLP_CUDA_RETURN_IF_ERROR(s->optimizer->apply_gradients(s->gradient_tensors));
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
