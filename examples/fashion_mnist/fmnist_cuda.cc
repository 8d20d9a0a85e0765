// The Fashion-MNIST classifier on CUDA replicas: the same network, data,
// initial weights and names as fashion_mnist.cc with the prefix
// "fmnist_cuda_", computed on the replica's device and stream by CudaMlp
// (cuBLAS and kernels). The data set prefetches each batch into the
// replica's memory while the step before runs; the step unpacks it there.

#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cohort/step.h"
#include "examples/fashion_mnist/fmnist_config.h"
#include "examples/fashion_mnist/fmnist_data.h"
#include "examples/fashion_mnist/fmnist_kernels.h"
#include "examples/fashion_mnist/fmnist_model.h"
#include "examples/fashion_mnist/idx_file.h"
#include "examples/mlp_cuda/cuda_mlp.h"

namespace cohort::examples {
namespace {

// A step library sees only the public headers, which have no such macro.
#define FMNIST_CUDA_RETURN_IF_ERROR(expr) \
  do {                                    \
    absl::Status _status = (expr);        \
    if (!_status.ok()) return _status;    \
  } while (false)

absl::Status Cuda(cudaError_t error, const char* what) {
  return CudaStatus(error, std::string("fmnist_cuda: ") + what);
}

// Test images evaluated at once.
constexpr int kEvalChunk = 1000;

struct CudaBytes {
  void operator()(uint8_t* p) const { cudaFree(p); }
};
using DeviceBytes = std::unique_ptr<uint8_t, CudaBytes>;

absl::Status AllocateBytes(size_t count, DeviceBytes& out) {
  uint8_t* p = nullptr;
  FMNIST_CUDA_RETURN_IF_ERROR(
      Cuda(cudaMalloc(&p, std::max<size_t>(count, 1)), "cudaMalloc"));
  out.reset(p);
  return absl::OkStatus();
}

// A replica's model, its block of the test set and its device buffers,
// made by its init. Used from its replica's thread only.
struct ReplicaState {
  int device = 0;
  cudaStream_t stream = nullptr;  // the runtime's
  FashionConfig config;
  std::vector<Variable*> variables;
  Optimizer* optimizer = nullptr;
  std::unique_ptr<CudaMlp> mlp;
  DeviceFloats scalar;
  int test_rows = 0;     // this replica's block of the test set
  int64_t test_total = 0;  // every replica's
  DeviceBytes test;      // [test_rows] examples
  int capacity = 0;      // rows of the buffers below
  DeviceBytes staged;    // a batch copied from the host
  DeviceFloats input;    // [rows, 784]
  DeviceFloats labels;   // [rows]
  std::string host_batch;
};

absl::Status Reserve(ReplicaState& s, int rows) {
  if (rows <= s.capacity) return absl::OkStatus();
  FMNIST_CUDA_RETURN_IF_ERROR(AllocateBytes(rows * kExampleBytes, s.staged));
  FMNIST_CUDA_RETURN_IF_ERROR(
      AllocateFloats(static_cast<size_t>(rows) * kImagePixels, s.input));
  FMNIST_CUDA_RETURN_IF_ERROR(AllocateFloats(rows, s.labels));
  s.capacity = rows;
  return absl::OkStatus();
}

absl::StatusOr<float> ReadScalar(ReplicaState& s) {
  float value = 0;
  FMNIST_CUDA_RETURN_IF_ERROR(
      Cuda(cudaMemcpyAsync(&value, s.scalar.get(), sizeof(float),
                           cudaMemcpyDeviceToHost, s.stream),
           "copy to host"));
  FMNIST_CUDA_RETURN_IF_ERROR(
      Cuda(cudaStreamSynchronize(s.stream), "stream synchronize"));
  return value;
}

// This replica's share of the test accuracy: its block's right answers
// over the whole test set.
absl::StatusOr<double> AccuracyShare(ReplicaState& s) {
  double correct = 0;
  for (int at = 0; at < s.test_rows; at += kEvalChunk) {
    const int rows = std::min(kEvalChunk, s.test_rows - at);
    FMNIST_CUDA_RETURN_IF_ERROR(Reserve(s, rows));
    FMNIST_CUDA_RETURN_IF_ERROR(
        Cuda(cuda::UnpackExamples(s.test.get() + at * kExampleBytes, rows,
                                  s.input.get(), s.labels.get(), s.stream),
             "unpack the test set"));
    FMNIST_CUDA_RETURN_IF_ERROR(s.mlp->CountCorrect(
        s.input.get(), kImagePixels, s.labels.get(), 1, rows, s.scalar.get()));
    absl::StatusOr<float> chunk = ReadScalar(s);
    if (!chunk.ok()) return chunk.status();
    correct += *chunk;
  }
  return correct / static_cast<double>(s.test_total);
}

absl::Status SetUp(ReplicaContext& ctx, ReplicaState& s) {
  s.device = ctx.device().index;
  s.stream = static_cast<cudaStream_t>(ctx.device().stream);
  FMNIST_CUDA_RETURN_IF_ERROR(Cuda(cudaSetDevice(s.device), "cudaSetDevice"));
  absl::StatusOr<FashionConfig> config = ParseFashionConfig(ctx.config_json());
  if (!config.ok()) return config.status();
  s.config = *std::move(config);
  absl::StatusOr<std::vector<Variable*>> variables =
      CreateFashionVariables(ctx, s.config, ctx.seed());
  if (!variables.ok()) return variables.status();
  s.variables = *std::move(variables);
  absl::StatusOr<Optimizer*> optimizer =
      ctx.create_optimizer({.kind = OptimizerKind::kAdam,
                            .learning_rate = s.config.learning_rate},
                           s.variables);
  if (!optimizer.ok()) return optimizer.status();
  s.optimizer = *optimizer;
  std::vector<CudaMlp::Layer> layers;
  for (const DenseShape& d : FashionShape(s.config)) {
    layers.push_back({d.in, d.out});
  }
  absl::StatusOr<std::unique_ptr<CudaMlp>> mlp =
      CudaMlp::Create(ctx.device(), std::move(layers), s.variables);
  if (!mlp.ok()) return mlp.status();
  s.mlp = *std::move(mlp);

  FMNIST_CUDA_RETURN_IF_ERROR(AllocateFloats(1, s.scalar));

  // This replica's contiguous block of the test set, on its device.
  absl::StatusOr<FashionMnistSplit> test =
      ReadFashionMnist(s.config.source_dir, "t10k");
  if (!test.ok()) return test.status();
  s.test_total = std::min(s.config.test_examples, test->count);
  const int replica = ctx.replica_id_in_sync_group();
  const int replicas = ctx.num_replicas_in_sync();
  const int64_t begin = s.test_total * replica / replicas;
  const int64_t end = s.test_total * (replica + 1) / replicas;
  s.test_rows = static_cast<int>(end - begin);
  FMNIST_CUDA_RETURN_IF_ERROR(
      AllocateBytes(s.test_rows * kExampleBytes, s.test));
  FMNIST_CUDA_RETURN_IF_ERROR(
      Cuda(cudaMemcpyAsync(s.test.get(),
                           test->examples.data() + begin * kExampleBytes,
                           s.test_rows * kExampleBytes, cudaMemcpyHostToDevice,
                           s.stream),
           "copy the test set"));
  // The host copy goes out of scope here.
  return Cuda(cudaStreamSynchronize(s.stream), "stream synchronize");
}

absl::StatusOr<std::unique_ptr<Dataset>> FashionCudaData(
    const InputContext& input) {
  return OpenFashionRecords(input, /*to_device=*/true);
}

absl::Status FashionCudaInit(ReplicaContext& ctx) {
  if (!ctx.device().is_cuda()) {
    return absl::FailedPreconditionError(
        "fmnist_cuda_init: this library needs a CUDA device, and this "
        "replica is on cpu:" +
        std::to_string(ctx.device().index) +
        "; use libcohort_example_fmnist.so (fmnist_init, fmnist_step) on CPU "
        "devices");
  }
  auto state = std::make_unique<ReplicaState>();
  FMNIST_CUDA_RETURN_IF_ERROR(SetUp(ctx, *state));
  ctx.set_user_state(std::shared_ptr<ReplicaState>(std::move(state)));
  return absl::OkStatus();
}

absl::Status FashionCudaStep(ReplicaContext& ctx, const Batch& batch) {
  ReplicaState* s = ctx.state<ReplicaState>();
  if (s == nullptr) {
    return absl::FailedPreconditionError(
        "fmnist_cuda_step: no state for this replica; submit the job with "
        "--init=fmnist_cuda_init");
  }
  const int rows = static_cast<int>(batch.size());
  if (rows == 0) {
    return absl::InvalidArgumentError("fmnist_cuda_step: the batch is empty");
  }
  FMNIST_CUDA_RETURN_IF_ERROR(Cuda(cudaSetDevice(s->device), "cudaSetDevice"));
  FMNIST_CUDA_RETURN_IF_ERROR(Reserve(*s, rows));
  // The host's view of the batch, checked even when it was prefetched: the
  // kernels index the logits by label.
  for (int r = 0; r < rows; ++r) {
    FMNIST_CUDA_RETURN_IF_ERROR(
        CheckExample(batch.element(r), r, "fmnist_cuda_step"));
  }
  const uint8_t* examples = batch.device_as<uint8_t>();
  if (examples == nullptr || batch.element_bytes() != kExampleBytes) {
    // Not prefetched (or not this data): stage it from the host.
    s->host_batch.clear();
    for (int r = 0; r < rows; ++r) s->host_batch.append(batch.element(r));
    FMNIST_CUDA_RETURN_IF_ERROR(
        Cuda(cudaMemcpyAsync(s->staged.get(), s->host_batch.data(),
                             s->host_batch.size(), cudaMemcpyHostToDevice,
                             s->stream),
             "copy the batch"));
    examples = s->staged.get();
  }
  FMNIST_CUDA_RETURN_IF_ERROR(
      Cuda(cuda::UnpackExamples(examples, rows, s->input.get(),
                                s->labels.get(), s->stream),
           "unpack the batch"));
  FMNIST_CUDA_RETURN_IF_ERROR(s->mlp->ForwardBackward(
      s->input.get(), kImagePixels, s->labels.get(), 1, rows,
      s->scalar.get()));
  FMNIST_CUDA_RETURN_IF_ERROR(
      s->optimizer->apply_gradients(s->mlp->gradients()));
  absl::StatusOr<float> loss = ReadScalar(*s);
  if (!loss.ok()) return loss.status();
  ctx.report("loss", *loss, ReduceOp::kMean);

  const int64_t every = s->config.eval_every;
  const bool last = ctx.step() == ctx.total_steps() - 1;
  if (last || (every > 0 && (ctx.step() + 1) % every == 0)) {
    absl::StatusOr<double> share = AccuracyShare(*s);
    if (!share.ok()) return share.status();
    ctx.report("accuracy", *share, ReduceOp::kSum);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace cohort::examples

COHORT_REGISTER_DATASET("fmnist_cuda_data", cohort::examples::FashionCudaData);
COHORT_REGISTER_INIT("fmnist_cuda_init", cohort::examples::FashionCudaInit);
COHORT_REGISTER_STEP("fmnist_cuda_step", cohort::examples::FashionCudaStep);
