#pragma once

// The Fashion-MNIST example's own CUDA kernel; the network's are CudaMlp's.

#include <cuda_runtime.h>

#include <cstdint>

namespace cohort::examples::cuda {

// From `rows` examples of kExampleBytes (a label byte, then 784 pixel
// bytes) in device memory: input[r, p] = pixel / 255 and labels[r] = label,
// as floats. Queued on `stream`; returns the launch's error.
cudaError_t UnpackExamples(const uint8_t* examples, int rows, float* input,
                           float* labels, cudaStream_t stream);

}  // namespace cohort::examples::cuda
