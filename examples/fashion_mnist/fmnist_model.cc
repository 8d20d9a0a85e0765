#include "examples/fashion_mnist/fmnist_model.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "examples/common/softmax_cross_entropy.h"

namespace cohort::examples {
namespace {

// Rows evaluated at once when counting the test set.
constexpr int64_t kEvalChunk = 1000;

// out = in · kernel + bias (in: [rows, k.in], kernel: [k.in, k.out]), then
// ReLU unless it is the last layer.
void Dense(const float* in, int64_t rows, const float* kernel,
           const float* bias, const DenseShape& k, bool relu, float* out) {
  for (int64_t b = 0; b < rows; ++b) std::copy_n(bias, k.out, out + b * k.out);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans,
              static_cast<int>(rows), k.out, k.in, 1.0f, in, k.in, kernel,
              k.out, 1.0f, out, k.out);
  if (relu) {
    for (int64_t i = 0; i < rows * k.out; ++i) out[i] = std::max(out[i], 0.0f);
  }
}

}  // namespace

std::array<DenseShape, kFashionLayers> FashionShape(const FashionConfig& c) {
  return {DenseShape{kImagePixels, c.hidden1}, DenseShape{c.hidden1, c.hidden2},
          DenseShape{c.hidden2, kFashionClasses}};
}

absl::StatusOr<std::vector<Variable*>> CreateFashionVariables(
    ReplicaContext& ctx, const FashionConfig& config, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Variable*> variables;
  const auto shape = FashionShape(config);
  for (int k = 0; k < kFashionLayers; ++k) {
    const DenseShape& d = shape[k];
    // Glorot uniform; the mapping to [-limit, limit) is written out, as
    // <random>'s distributions differ between standard libraries.
    const double limit = std::sqrt(6.0 / (d.in + d.out));
    std::vector<float> kernel(static_cast<size_t>(d.in) * d.out);
    for (float& w : kernel) {
      w = static_cast<float>(
          (2.0 * static_cast<double>(rng() >> 11) * 0x1.0p-53 - 1.0) * limit);
    }
    const std::string name = "dense" + std::to_string(k);
    absl::StatusOr<Variable*> w = ctx.create_variable(
        {.name = name + "/kernel", .shape = {d.in, d.out}}, kernel.data());
    if (!w.ok()) return w.status();
    absl::StatusOr<Variable*> b =
        ctx.create_variable({.name = name + "/bias", .shape = {d.out}}, nullptr);
    if (!b.ok()) return b.status();
    variables.push_back(*w);
    variables.push_back(*b);
  }
  return variables;
}

FashionMlp::FashionMlp(const FashionConfig& config)
    : shape_(FashionShape(config)) {}

absl::Status CheckExample(std::string_view example, size_t index,
                          std::string_view who) {
  const std::string element =
      std::string(who) + ": element " + std::to_string(index);
  if (example.size() != kExampleBytes) {
    return absl::InvalidArgumentError(
        element + " of the batch has " + std::to_string(example.size()) +
        " bytes, expected " + std::to_string(kExampleBytes) +
        " (a label and 28x28 pixels); is the data made by "
        "cohort-example-fmnist-data?");
  }
  const auto label = static_cast<uint8_t>(example[0]);
  if (label >= kFashionClasses) {
    return absl::InvalidArgumentError(
        element + " has label " + std::to_string(label) + ", expected 0 to 9");
  }
  return absl::OkStatus();
}

absl::Status FashionMlp::Load(const Batch& batch) {
  rows_ = static_cast<int64_t>(batch.size());
  input_.resize(static_cast<size_t>(rows_) * kImagePixels);
  labels_.resize(static_cast<size_t>(rows_));
  for (int64_t b = 0; b < rows_; ++b) {
    const std::string_view e = batch.element(static_cast<size_t>(b));
    if (absl::Status s = CheckExample(e, static_cast<size_t>(b), "fmnist");
        !s.ok()) {
      return s;
    }
    const auto* bytes = reinterpret_cast<const uint8_t*>(e.data());
    labels_[static_cast<size_t>(b)] = bytes[0];
    float* x = &input_[static_cast<size_t>(b) * kImagePixels];
    for (int p = 0; p < kImagePixels; ++p) x[p] = bytes[1 + p] * (1.0f / 255);
  }
  return absl::OkStatus();
}

absl::Status FashionMlp::Load(const uint8_t* examples, int64_t rows) {
  std::vector<std::string_view> views;
  views.reserve(static_cast<size_t>(rows));
  for (int64_t b = 0; b < rows; ++b) {
    views.emplace_back(reinterpret_cast<const char*>(examples) +
                           static_cast<size_t>(b) * kExampleBytes,
                       kExampleBytes);
  }
  return Load(Batch(std::move(views)));
}

void FashionMlp::Forward(const std::vector<const float*>& params) {
  const float* in = input_.data();
  for (int k = 0; k < kFashionLayers; ++k) {
    outputs_[k].resize(static_cast<size_t>(rows_) * shape_[k].out);
    Dense(in, rows_, params[2 * k], params[2 * k + 1], shape_[k],
          k + 1 < kFashionLayers, outputs_[k].data());
    in = outputs_[k].data();
  }
}

double FashionMlp::Backward(const std::vector<const float*>& params,
                            std::vector<std::vector<float>>& gradients) {
  // d(loss)/d(logits) = (softmax - one_hot) / rows.
  const std::vector<float>& logits = outputs_.back();
  delta_.resize(static_cast<size_t>(rows_) * kFashionClasses);
  double loss = 0;
  for (int64_t b = 0; b < rows_; ++b) {
    const size_t row = static_cast<size_t>(b) * kFashionClasses;
    loss += SoftmaxCrossEntropy(&logits[row], kFashionClasses,
                                labels_[static_cast<size_t>(b)], &delta_[row],
                                static_cast<double>(rows_));
  }
  const int rows = static_cast<int>(rows_);
  for (int k = kFashionLayers - 1; k >= 0; --k) {
    const DenseShape& d = shape_[k];
    const float* in = k == 0 ? input_.data() : outputs_[k - 1].data();
    // dkernel = inᵀ · delta; dbias = the column sums of delta.
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d.in, d.out, rows,
                1.0f, in, d.in, delta_.data(), d.out, 0.0f,
                gradients[2 * k].data(), d.out);
    std::vector<float>& dbias = gradients[2 * k + 1];
    std::fill(dbias.begin(), dbias.end(), 0.0f);
    for (int b = 0; b < rows; ++b) {
      const float* row = &delta_[static_cast<size_t>(b) * d.out];
      for (int j = 0; j < d.out; ++j) dbias[j] += row[j];
    }
    if (k == 0) break;
    // Back through the kernel (delta · kernelᵀ), then the ReLU below it.
    delta_below_.resize(static_cast<size_t>(rows) * d.in);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, d.in, d.out,
                1.0f, delta_.data(), d.out, params[2 * k], d.out, 0.0f,
                delta_below_.data(), d.in);
    for (size_t i = 0; i < delta_below_.size(); ++i) {
      if (in[i] <= 0) delta_below_[i] = 0;
    }
    std::swap(delta_, delta_below_);
  }
  return loss / static_cast<double>(rows_);
}

int64_t FashionMlp::Correct() const {
  const std::vector<float>& logits = outputs_.back();
  int64_t correct = 0;
  for (int64_t b = 0; b < rows_; ++b) {
    const float* z = &logits[static_cast<size_t>(b) * kFashionClasses];
    correct += std::max_element(z, z + kFashionClasses) - z ==
               labels_[static_cast<size_t>(b)];
  }
  return correct;
}

int64_t CountCorrect(FashionMlp& model, const FashionMnistSplit& test,
                     int64_t count, int replica, int replicas,
                     const std::vector<const float*>& params) {
  count = std::min(count, test.count);
  const int64_t begin = count * replica / replicas;
  const int64_t end = count * (replica + 1) / replicas;
  int64_t correct = 0;
  for (int64_t at = begin; at < end; at += kEvalChunk) {
    const int64_t rows = std::min(kEvalChunk, end - at);
    // The split was checked when it was read: Load cannot fail on it.
    (void)model.Load(test.pixels(at) - 1, rows);
    model.Forward(params);
    correct += model.Correct();
  }
  return correct;
}

}  // namespace cohort::examples
