#pragma once

// Fashion-MNIST as Debian's dataset-fashion-mnist ships it: gzipped IDX
// files (big-endian magic 0x00000803 for images, 0x00000801 for labels,
// then the dimensions, then unsigned bytes).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "examples/fashion_mnist/fmnist_format.h"

namespace cohort::examples {

// One split of the data set, as kExampleBytes-long examples back to back.
struct FashionMnistSplit {
  int64_t count = 0;
  std::string examples;

  int label(int64_t i) const {
    return static_cast<uint8_t>(examples[static_cast<size_t>(i) * kExampleBytes]);
  }
  const uint8_t* pixels(int64_t i) const {
    return reinterpret_cast<const uint8_t*>(examples.data()) +
           static_cast<size_t>(i) * kExampleBytes + 1;
  }
};

// Reads `<dir>/<split>-images-idx3-ubyte.gz` and the labels beside it
// (`split` is "train" or "t10k"). NOT_FOUND naming a missing file;
// DATA_LOSS naming the file for a truncated or corrupt gzip stream, a wrong
// magic number, images that are not 28x28, a label above 9, or image and
// label counts that differ.
absl::StatusOr<FashionMnistSplit> ReadFashionMnist(const std::string& dir,
                                                   const std::string& split);

}  // namespace cohort::examples
