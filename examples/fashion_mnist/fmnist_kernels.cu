#include "examples/fashion_mnist/fmnist_kernels.h"

#include "examples/fashion_mnist/fmnist_format.h"

namespace cohort::examples::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void UnpackKernel(const uint8_t* examples, int rows, float* input,
                             float* labels) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= int64_t{rows} * kImagePixels) return;
  const int64_t r = i / kImagePixels;
  const int64_t p = i % kImagePixels;
  const uint8_t* e = examples + r * kExampleBytes;
  input[i] = e[1 + p] * (1.0f / 255);
  if (p == 0) labels[r] = e[0];
}

}  // namespace

cudaError_t UnpackExamples(const uint8_t* examples, int rows, float* input,
                           float* labels, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const int64_t count = int64_t{rows} * kImagePixels;
  UnpackKernel<<<static_cast<unsigned>((count + kThreads - 1) / kThreads),
                 kThreads, 0, stream>>>(examples, rows, input, labels);
  return cudaGetLastError();
}

}  // namespace cohort::examples::cuda
