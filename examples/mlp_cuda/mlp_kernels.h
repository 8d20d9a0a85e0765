#pragma once

// The few small kernels of the CUDA MLP examples (spirals and
// Fashion-MNIST); the matrix products are cuBLAS's. Matrices are row-major, one row per example. Every launcher
// queues its kernel on `stream` and returns the launch's error. Reductions
// have a fixed order, so that results repeat bitwise.

#include <cuda_runtime.h>

namespace cohort::examples::cuda {

// z[r, c] += bias[c], then ReLU when `relu`.
cudaError_t BiasActivation(float* z, const float* bias, int rows, int cols,
                           bool relu, cudaStream_t stream);

// For logits [rows, classes] and row r's label at labels[r * label_stride]
// (a float holding the class): loss[r] = softmax cross-entropy of row r,
// and delta = (softmax - one_hot) / rows.
cudaError_t SoftmaxCrossEntropy(const float* logits, const float* labels,
                                int label_stride, int rows, int classes,
                                float* loss, float* delta,
                                cudaStream_t stream);

// delta[i] = 0 where activation[i] <= 0: back through a ReLU.
cudaError_t ReluGrad(float* delta, const float* activation, int count,
                     cudaStream_t stream);

// out[c] = sum over rows of m[r, c]: a bias gradient.
cudaError_t ColumnSums(const float* m, int rows, int cols, float* out,
                       cudaStream_t stream);

// correct[r] = 1 when row r's largest logit is its label (laid out as for
// SoftmaxCrossEntropy), else 0.
cudaError_t Correct(const float* logits, const float* labels,
                    int label_stride, int rows, int classes, float* correct,
                    cudaStream_t stream);

// *out = scale * (v[0] + ... + v[n - 1]).
cudaError_t Sum(const float* v, int n, float scale, float* out,
                cudaStream_t stream);

}  // namespace cohort::examples::cuda
