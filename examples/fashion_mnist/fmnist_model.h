#pragma once

// The Fashion-MNIST classifier: an MLP 784 -> hidden1 -> hidden2 -> 10 with
// ReLU and softmax cross-entropy, float32, its matrix products done by
// OpenBLAS (cblas_sgemm). Variables are the kernels and biases of the three
// dense layers, in that order.

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/step.h"
#include "examples/fashion_mnist/fmnist_config.h"

namespace cohort::examples {

inline constexpr int kFashionLayers = 3;

// One dense layer's sizes.
struct DenseShape {
  int in = 0;
  int out = 0;
};
std::array<DenseShape, kFashionLayers> FashionShape(const FashionConfig& c);

// Creates the six variables ("dense<k>/kernel" [in, out], "dense<k>/bias"
// [out]): kernels Glorot-uniform from `seed` (Keras' default), biases zero.
absl::StatusOr<std::vector<Variable*>> CreateFashionVariables(
    ReplicaContext& ctx, const FashionConfig& config, uint64_t seed);

// Checks element `index` of a batch: kExampleBytes long, with a label below
// kFashionClasses. INVALID_ARGUMENT naming the element, prefixed `who: `.
absl::Status CheckExample(std::string_view example, size_t index,
                          std::string_view who);

// The forward and backward passes of one replica, with their scratch
// matrices. Not thread-safe: one replica's.
class FashionMlp {
 public:
  explicit FashionMlp(const FashionConfig& config);

  // The batch's pixels, scaled to [0, 1], and its labels, from examples of
  // kExampleBytes (label, then pixels); INVALID_ARGUMENT naming the element
  // of another size or a label above 9.
  absl::Status Load(const Batch& batch);
  // The same from `rows` examples laid out back to back.
  absl::Status Load(const uint8_t* examples, int64_t rows);

  // Logits of the loaded rows under `params` (the six variables' values).
  void Forward(const std::vector<const float*>& params);
  // The mean softmax cross-entropy of the loaded rows, after Forward(), and
  // its gradients with respect to each variable into `gradients`.
  double Backward(const std::vector<const float*>& params,
                  std::vector<std::vector<float>>& gradients);
  // How many loaded rows the logits classify right, after Forward().
  int64_t Correct() const;

  int64_t rows() const { return rows_; }

 private:
  const std::array<DenseShape, kFashionLayers> shape_;
  int64_t rows_ = 0;
  std::vector<float> input_;   // [rows, 784]
  std::vector<int> labels_;    // [rows]
  // Each layer's output: ReLU activations, then the logits.
  std::array<std::vector<float>, kFashionLayers> outputs_;
  std::vector<float> delta_, delta_below_;
};

// Runs the model on `replica`'s share of the first `count` test examples (a
// contiguous block, replicas' blocks together covering them), a chunk at a
// time; how many it classifies right.
int64_t CountCorrect(FashionMlp& model, const FashionMnistSplit& test,
                     int64_t count, int replica, int replicas,
                     const std::vector<const float*>& params);

}  // namespace cohort::examples
