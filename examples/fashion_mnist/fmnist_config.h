#pragma once

// The Fashion-MNIST example's settings, read from the job's config JSON.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "cohort/dataset.h"
#include "examples/fashion_mnist/idx_file.h"

namespace cohort::examples {

struct FashionConfig {
  // train-*.rec from cohort-example-fmnist-data: the training set.
  std::string data_dir;
  // The IDX files, whose t10k split is the test set.
  std::string source_dir = kFashionMnistDir;
  ShardPolicy shard_policy = ShardPolicy::kAuto;
  bool shuffle = true;
  int hidden1 = 256;  // units of the first hidden layer
  int hidden2 = 128;  // and of the second
  double learning_rate = 1e-3;  // Adam
  // Steps between test-accuracy reports; 0: at the last step only.
  int64_t eval_every = 0;
  // The first test_examples of the 10,000 test images are evaluated.
  int64_t test_examples = 10000;
  // Threads OpenBLAS may use in this process; replicas already run in
  // parallel, one thread each.
  int blas_threads = 1;
};

// INVALID_ARGUMENT naming the field for a bad value. Keys: "data_dir",
// "source_dir", "shard_policy", "shuffle", "hidden1", "hidden2",
// "learning_rate", "eval_every", "test_examples", "blas_threads". "data_dir"
// may be absent here; the dataset function needs it.
absl::StatusOr<FashionConfig> ParseFashionConfig(const std::string& json);

}  // namespace cohort::examples
