#pragma once

// A dense ReLU network with a softmax cross-entropy head on one CUDA
// replica, shared by the CUDA examples (spirals, Fashion-MNIST): cuBLAS for
// the matrix products, mlp_kernels.cu for the rest, all queued on the
// replica's stream. Its variables are the runtime's: each layer's kernel
// [in, out] and bias [out], in order, on the replica's device.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/step.h"

namespace cohort::examples {

// CUDA and cuBLAS errors as statuses, prefixed with `who` and `what`.
absl::Status CudaStatus(cudaError_t error, const std::string& what);
absl::Status CublasStatus(cublasStatus_t status, const std::string& what);

struct CudaFree {
  void operator()(float* p) const { cudaFree(p); }
};
using DeviceFloats = std::unique_ptr<float, CudaFree>;
// `count` floats of device memory on the current device.
absl::Status AllocateFloats(size_t count, DeviceFloats& out);

// Owns its cuBLAS handle and row buffers; the variables and the stream are
// the runtime's. Used from its replica's thread only.
class CudaMlp {
 public:
  struct Layer {
    int in = 0;
    int out = 0;
  };

  // `variables`: kernel and bias of each of `layers`. The device is made
  // current on the calling thread. Allocates a gradient for each variable.
  static absl::StatusOr<std::unique_ptr<CudaMlp>> Create(
      const Device& device, std::vector<Layer> layers,
      std::vector<Variable*> variables);
  ~CudaMlp();

  // Grows the per-row buffers to hold `rows` rows.
  absl::Status Reserve(int rows);
  // Logits of `rows` rows of `input` (row stride `ld` floats).
  absl::Status Forward(const float* input, int ld, int rows);
  // Forward, then the gradients of the mean loss with respect to each
  // variable into gradients(), and the mean loss into `*loss` (one float of
  // device memory). Row r's label is
  // labels[r * label_stride].
  absl::Status ForwardBackward(const float* input, int ld, const float* labels,
                               int label_stride, int rows, float* loss);
  // Forward, then how many rows it classifies right into `*count` (one
  // float of device memory).
  absl::Status CountCorrect(const float* input, int ld, const float* labels,
                            int label_stride, int rows, float* count);

  cudaStream_t stream() const { return stream_; }
  // One device tensor per variable, for ForwardBackward and the optimizer.
  const std::vector<Tensor>& gradients() const { return gradient_tensors_; }

 private:
  CudaMlp(const Device& device, std::vector<Layer> layers,
          std::vector<Variable*> variables);

  const int device_;
  const cudaStream_t stream_;
  const std::vector<Layer> layers_;
  const std::vector<Variable*> variables_;
  cublasHandle_t cublas_ = nullptr;
  int capacity_ = 0;
  std::vector<DeviceFloats> outputs_;  // each layer's: ReLU, then logits
  DeviceFloats delta_, delta_below_, per_row_;
  DeviceFloats gradients_;  // every variable's, back to back
  std::vector<Tensor> gradient_tensors_;
};

}  // namespace cohort::examples
