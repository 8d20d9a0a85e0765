#include "examples/mlp_cuda/mlp_kernels.h"

namespace cohort::examples::cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(int count) { return (count + kThreads - 1) / kThreads; }

__global__ void BiasActivationKernel(float* z, const float* bias, int rows,
                                     int cols, bool relu) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const float v = z[i] + bias[i % cols];
  z[i] = relu && v < 0 ? 0.0f : v;
}

__global__ void SoftmaxCrossEntropyKernel(const float* logits,
                                          const float* labels,
                                          int label_stride, int rows,
                                          int classes, float* loss,
                                          float* delta) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* z = logits + r * classes;
  const int label = static_cast<int>(labels[r * label_stride]);
  float top = z[0];
  for (int c = 1; c < classes; ++c) top = fmaxf(top, z[c]);
  float sum = 0;
  for (int c = 0; c < classes; ++c) sum += expf(z[c] - top);
  loss[r] = logf(sum) - (z[label] - top);
  for (int c = 0; c < classes; ++c) {
    const float p = expf(z[c] - top) / sum;
    delta[r * classes + c] = (p - (c == label ? 1.0f : 0.0f)) / rows;
  }
}

__global__ void ReluGradKernel(float* delta, const float* activation,
                               int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count && activation[i] <= 0) delta[i] = 0;
}

__global__ void ColumnSumsKernel(const float* m, int rows, int cols,
                                 float* out) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float sum = 0;
  for (int r = 0; r < rows; ++r) sum += m[r * cols + c];
  out[c] = sum;
}

__global__ void CorrectKernel(const float* logits, const float* labels,
                              int label_stride, int rows, int classes,
                              float* correct) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* z = logits + r * classes;
  int best = 0;
  for (int c = 1; c < classes; ++c) {
    if (z[c] > z[best]) best = c;
  }
  correct[r] =
      best == static_cast<int>(labels[r * label_stride]) ? 1.0f : 0.0f;
}

// One block: strided partial sums, then a tree; the same order every time.
__global__ void SumKernel(const float* v, int n, float scale, float* out) {
  __shared__ float partial[kThreads];
  float sum = 0;
  for (int i = threadIdx.x; i < n; i += kThreads) sum += v[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = scale * partial[0];
}

}  // namespace

cudaError_t BiasActivation(float* z, const float* bias, int rows, int cols,
                           bool relu, cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  BiasActivationKernel<<<Blocks(rows * cols), kThreads, 0, stream>>>(
      z, bias, rows, cols, relu);
  return cudaGetLastError();
}

cudaError_t SoftmaxCrossEntropy(const float* logits, const float* labels,
                                int label_stride, int rows, int classes,
                                float* loss, float* delta,
                                cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  SoftmaxCrossEntropyKernel<<<Blocks(rows), kThreads, 0, stream>>>(
      logits, labels, label_stride, rows, classes, loss, delta);
  return cudaGetLastError();
}

cudaError_t ReluGrad(float* delta, const float* activation, int count,
                     cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  ReluGradKernel<<<Blocks(count), kThreads, 0, stream>>>(delta, activation,
                                                         count);
  return cudaGetLastError();
}

cudaError_t ColumnSums(const float* m, int rows, int cols, float* out,
                       cudaStream_t stream) {
  ColumnSumsKernel<<<Blocks(cols), kThreads, 0, stream>>>(m, rows, cols, out);
  return cudaGetLastError();
}

cudaError_t Correct(const float* logits, const float* labels,
                    int label_stride, int rows, int classes, float* correct,
                    cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  CorrectKernel<<<Blocks(rows), kThreads, 0, stream>>>(
      logits, labels, label_stride, rows, classes, correct);
  return cudaGetLastError();
}

cudaError_t Sum(const float* v, int n, float scale, float* out,
                cudaStream_t stream) {
  SumKernel<<<1, kThreads, 0, stream>>>(v, n, scale, out);
  return cudaGetLastError();
}

}  // namespace cohort::examples::cuda
