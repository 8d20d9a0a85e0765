// CUDA kernels of the optimizer updates (optimizer_kernels.h). Built by nvcc
// as C++17, so this file sees neither Abseil nor step.h: optimizer_kernels.cc
// declares the functions below with the same plain signatures and turns
// their cudaError_t into an absl::Status. The per-element math is
// update_math.h's, the same code the host loops and the ps shards run.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "optimizer/update_math.h"

namespace cohort::optimizer {
namespace {

// OptimizerKind's values (step.h).
constexpr int kSgd = 0;
constexpr int kMomentum = 1;
constexpr int kAdam = 2;

constexpr int kThreads = 256;
// Enough blocks to fill the largest GPUs; a grid-stride loop does the rest.
constexpr size_t kMaxBlocks = 4096;

template <typename T>
struct Buffers {
  T* var;
  const T* grad;
  T* m;
  T* v;
  size_t count;
};

template <typename T>
__global__ void SgdKernel(Coefficients<T> c, Buffers<T> b) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < b.count;
       i += stride) {
    SgdUpdate(c, b.grad[i], b.var[i]);
  }
}

template <typename T>
__global__ void MomentumKernel(Coefficients<T> c, Buffers<T> b) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < b.count;
       i += stride) {
    MomentumUpdate(c, b.grad[i], b.var[i], b.m[i]);
  }
}

template <typename T>
__global__ void AdamKernel(Coefficients<T> c, Buffers<T> b) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < b.count;
       i += stride) {
    AdamUpdate(c, b.grad[i], b.var[i], b.m[i], b.v[i]);
  }
}

template <typename T>
int Launch(int kind, const Coefficients<T>& c, void* var, const void* grad,
           void* slot0, void* slot1, size_t count, void* stream) {
  if (count == 0) return cudaSuccess;
  const Buffers<T> b{static_cast<T*>(var), static_cast<const T*>(grad),
                     static_cast<T*>(slot0), static_cast<T*>(slot1), count};
  const size_t blocks = std::min((count + kThreads - 1) / kThreads, kMaxBlocks);
  const dim3 grid(static_cast<unsigned>(blocks));
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (kind) {
    case kSgd:
      SgdKernel<T><<<grid, kThreads, 0, s>>>(c, b);
      break;
    case kMomentum:
      MomentumKernel<T><<<grid, kThreads, 0, s>>>(c, b);
      break;
    case kAdam:
      AdamKernel<T><<<grid, kThreads, 0, s>>>(c, b);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

int LaunchOptimizerUpdate(int kind, const Coefficients<float>& c, void* var,
                          const void* grad, void* slot0, void* slot1,
                          size_t count, void* stream) {
  return Launch(kind, c, var, grad, slot0, slot1, count, stream);
}

int LaunchOptimizerUpdate(int kind, const Coefficients<double>& c, void* var,
                          const void* grad, void* slot0, void* slot1,
                          size_t count, void* stream) {
  return Launch(kind, c, var, grad, slot0, slot1, count, stream);
}

const char* CudaErrorName(int error) {
  return cudaGetErrorString(static_cast<cudaError_t>(error));
}

}  // namespace cohort::optimizer
