#pragma once

// The loss the classifier examples share, on the host: softmax
// cross-entropy over one row of logits, computed stably (shifted by the
// row's largest logit). Header-only, so that each library inlines it.

#include <algorithm>
#include <cmath>

namespace cohort::examples {

// The loss of logits z[0, classes) against `label`. With `delta`, also
// writes d(loss)/d(z) = (softmax - one_hot) / `divisor` there (the batch
// size, for a mean over it).
inline double SoftmaxCrossEntropy(const float* z, int classes, int label,
                                  float* delta = nullptr,
                                  double divisor = 1.0) {
  const float top = *std::max_element(z, z + classes);
  double sum = 0;
  for (int c = 0; c < classes; ++c) sum += std::exp(z[c] - top);
  if (delta != nullptr) {
    for (int c = 0; c < classes; ++c) {
      const double p = std::exp(z[c] - top) / sum;
      delta[c] = static_cast<float>((p - (c == label)) / divisor);
    }
  }
  return std::log(sum) - (z[label] - top);
}

}  // namespace cohort::examples
