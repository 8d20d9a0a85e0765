#pragma once

// The layout of a Fashion-MNIST example in this project's files and
// buffers; plain constants, for host code and CUDA kernels alike.

#include <cstddef>

namespace cohort::examples {

inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";
inline constexpr int kImagePixels = 28 * 28;
inline constexpr int kFashionClasses = 10;
// A record of the converted files and the in-memory sets: the label byte,
// then the 784 pixel bytes.
inline constexpr size_t kExampleBytes = 1 + kImagePixels;

}  // namespace cohort::examples
