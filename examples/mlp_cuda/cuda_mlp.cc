#include "examples/mlp_cuda/cuda_mlp.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "examples/mlp_cuda/mlp_kernels.h"

namespace cohort::examples {

// A step library sees only the public headers, which have no such macro.
#define CUDA_MLP_RETURN_IF_ERROR(expr) \
  do {                                 \
    absl::Status _status = (expr);     \
    if (!_status.ok()) return _status; \
  } while (false)

absl::Status CudaStatus(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = what + ": " + cudaGetErrorString(error);
  return error == cudaErrorMemoryAllocation
             ? absl::ResourceExhaustedError(message)
             : absl::InternalError(message);
}

absl::Status CublasStatus(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(what + ": " + cublasGetStatusString(status));
}

absl::Status AllocateFloats(size_t count, DeviceFloats& out) {
  float* p = nullptr;
  CUDA_MLP_RETURN_IF_ERROR(CudaStatus(
      cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(float)),
      "cudaMalloc"));
  out.reset(p);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaMlp>> CudaMlp::Create(
    const Device& device, std::vector<Layer> layers,
    std::vector<Variable*> variables) {
  if (!device.is_cuda()) {
    return absl::FailedPreconditionError(
        "a CUDA MLP needs a CUDA device; this replica is on cpu:" +
        std::to_string(device.index));
  }
  if (variables.size() != 2 * layers.size()) {
    return absl::InvalidArgumentError("a CUDA MLP takes a kernel and a bias "
                                      "per layer");
  }
  CUDA_MLP_RETURN_IF_ERROR(
      CudaStatus(cudaSetDevice(device.index), "cudaSetDevice"));
  std::unique_ptr<CudaMlp> mlp(
      new CudaMlp(device, std::move(layers), std::move(variables)));
  CUDA_MLP_RETURN_IF_ERROR(
      CublasStatus(cublasCreate(&mlp->cublas_), "cublasCreate"));
  CUDA_MLP_RETURN_IF_ERROR(CublasStatus(
      cublasSetStream(mlp->cublas_, mlp->stream_), "cublasSetStream"));
  size_t total = 0;
  for (Variable* v : mlp->variables_) total += v->count();
  CUDA_MLP_RETURN_IF_ERROR(AllocateFloats(total, mlp->gradients_));
  size_t offset = 0;
  for (Variable* v : mlp->variables_) {
    mlp->gradient_tensors_.push_back(
        {mlp->gradients_.get() + offset, v->count(), DType::kFloat32});
    offset += v->count();
  }
  return mlp;
}

CudaMlp::CudaMlp(const Device& device, std::vector<Layer> layers,
                 std::vector<Variable*> variables)
    : device_(device.index),
      stream_(static_cast<cudaStream_t>(device.stream)),
      layers_(std::move(layers)),
      variables_(std::move(variables)),
      outputs_(layers_.size()) {}

CudaMlp::~CudaMlp() {
  // Frees on the replica's device.
  cudaSetDevice(device_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
}

absl::Status CudaMlp::Reserve(int rows) {
  if (rows <= capacity_) return absl::OkStatus();
  // Deltas flow over every layer's outputs and every input but the first.
  int widest = 0;
  for (size_t k = 0; k < layers_.size(); ++k) {
    widest = std::max(widest, layers_[k].out);
    if (k > 0) widest = std::max(widest, layers_[k].in);
  }
  // The kernels index a layer's rows x width elements with int, as cuBLAS
  // takes its dimensions.
  int widest_in = widest;
  for (const Layer& layer : layers_) widest_in = std::max(widest_in, layer.in);
  if (int64_t{rows} * widest_in > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a batch of ", rows, " rows through a layer ", widest_in,
        " wide is over the ", std::numeric_limits<int>::max(),
        " elements the CUDA MLP indexes; use a smaller per-replica batch"));
  }
  const size_t n = static_cast<size_t>(rows);
  for (size_t k = 0; k < layers_.size(); ++k) {
    CUDA_MLP_RETURN_IF_ERROR(AllocateFloats(n * layers_[k].out, outputs_[k]));
  }
  CUDA_MLP_RETURN_IF_ERROR(AllocateFloats(n * widest, delta_));
  CUDA_MLP_RETURN_IF_ERROR(AllocateFloats(n * widest, delta_below_));
  CUDA_MLP_RETURN_IF_ERROR(AllocateFloats(n, per_row_));
  capacity_ = rows;
  return absl::OkStatus();
}

// Row-major out = in · kernel is column-major out^T = kernel^T · in^T, which
// is how cuBLAS sees the same memory: no transposes needed.
absl::Status CudaMlp::Forward(const float* input, int ld, int rows) {
  if (rows == 0) return absl::OkStatus();
  CUDA_MLP_RETURN_IF_ERROR(Reserve(rows));
  const float one = 1, zero = 0;
  const float* in = input;
  for (size_t k = 0; k < layers_.size(); ++k) {
    const Layer& layer = layers_[k];
    CUDA_MLP_RETURN_IF_ERROR(CublasStatus(
        cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, layer.out, rows,
                    layer.in, &one, variables_[2 * k]->data<float>(),
                    layer.out, in, ld, &zero, outputs_[k].get(), layer.out),
        "forward sgemm"));
    CUDA_MLP_RETURN_IF_ERROR(CudaStatus(
        cuda::BiasActivation(outputs_[k].get(),
                             variables_[2 * k + 1]->data<float>(), rows,
                             layer.out, k + 1 < layers_.size(), stream_),
        "bias and activation"));
    in = outputs_[k].get();
    ld = layer.out;
  }
  return absl::OkStatus();
}

absl::Status CudaMlp::ForwardBackward(const float* input, int ld,
                                      const float* labels, int label_stride,
                                      int rows, float* loss) {
  CUDA_MLP_RETURN_IF_ERROR(Forward(input, ld, rows));
  const int classes = layers_.back().out;
  CUDA_MLP_RETURN_IF_ERROR(CudaStatus(
      cuda::SoftmaxCrossEntropy(outputs_.back().get(), labels, label_stride,
                                rows, classes, per_row_.get(), delta_.get(),
                                stream_),
      "softmax cross-entropy"));
  CUDA_MLP_RETURN_IF_ERROR(CudaStatus(
      cuda::Sum(per_row_.get(), rows, 1.0f / static_cast<float>(rows), loss,
                stream_),
      "loss sum"));
  const float one = 1, zero = 0;
  for (int k = static_cast<int>(layers_.size()) - 1; k >= 0; --k) {
    const Layer& layer = layers_[k];
    const float* in = k == 0 ? input : outputs_[k - 1].get();
    const int in_ld = k == 0 ? ld : layer.in;
    float* dkernel = gradient_tensors_[2 * k].as<float>();
    float* dbias = gradient_tensors_[2 * k + 1].as<float>();
    // dkernel = in^T · delta; column-major: delta^T · in.
    CUDA_MLP_RETURN_IF_ERROR(CublasStatus(
        cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, layer.out, layer.in,
                    rows, &one, delta_.get(), layer.out, in, in_ld, &zero,
                    dkernel, layer.out),
        "kernel gradient sgemm"));
    CUDA_MLP_RETURN_IF_ERROR(CudaStatus(
        cuda::ColumnSums(delta_.get(), rows, layer.out, dbias, stream_),
        "bias gradient"));
    if (k == 0) break;
    // delta_below = delta · kernel^T, then back through the ReLU.
    CUDA_MLP_RETURN_IF_ERROR(CublasStatus(
        cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, layer.in, rows,
                    layer.out, &one, variables_[2 * k]->data<float>(),
                    layer.out, delta_.get(), layer.out, &zero,
                    delta_below_.get(), layer.in),
        "backward sgemm"));
    CUDA_MLP_RETURN_IF_ERROR(CudaStatus(
        cuda::ReluGrad(delta_below_.get(), outputs_[k - 1].get(),
                       rows * layer.in, stream_),
        "relu gradient"));
    std::swap(delta_, delta_below_);
  }
  return absl::OkStatus();
}

absl::Status CudaMlp::CountCorrect(const float* input, int ld,
                                   const float* labels, int label_stride,
                                   int rows, float* count) {
  CUDA_MLP_RETURN_IF_ERROR(Forward(input, ld, rows));
  CUDA_MLP_RETURN_IF_ERROR(CudaStatus(
      cuda::Correct(outputs_.back().get(), labels, label_stride, rows,
                    layers_.back().out, per_row_.get(), stream_),
      "correct"));
  return CudaStatus(cuda::Sum(per_row_.get(), rows, 1.0f, count, stream_),
                    "correct sum");
}

}  // namespace cohort::examples
