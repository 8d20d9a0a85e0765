#pragma once

// What the CPU and CUDA MLP libraries share: the network's shape and
// variables, the held-out set, the batch layout and the dataset function.
// The network is 2 → hidden → hidden → 2, ReLU hidden layers, softmax
// cross-entropy on the two logits.

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/dataset.h"
#include "cohort/step.h"
#include "examples/mlp/mlp_config.h"
#include "examples/mlp/spiral_data.h"

namespace cohort::examples {

inline constexpr int kMlpInputs = 2;
inline constexpr int kMlpClasses = 2;
inline constexpr int kMlpLayers = 3;
// Held-out examples come from the job's seed plus this, away from the seeds
// that training files are usually made with.
inline constexpr uint64_t kHeldOutSeedOffset = 1000003;

struct MlpLayerShape {
  int in = 0;
  int out = 0;
};
std::array<MlpLayerShape, kMlpLayers> MlpShape(int hidden);

// The logical device that holds layer `layer` when the model is split over
// `num_logical_devices`: consecutive layers, as even as three go.
int MlpLayerDevice(int layer, int num_logical_devices);

// Creates "dense<k>/kernel" [in, out] (row-major) and "dense<k>/bias" [out]
// for k = 0, 1, 2, in that order, float32 ON_WRITE: Glorot-uniform kernels
// drawn from the job's seed, zero biases. With `split`, layer k's live on
// logical device MlpLayerDevice(k, ctx.num_logical_devices()). Returns them
// in that order.
absl::StatusOr<std::vector<Variable*>> CreateMlpVariables(ReplicaContext& ctx,
                                                          int hidden,
                                                          bool split = false);

// out[b, :] = in[b, :] · kernel + bias for `rows` rows of `in` (a row every
// `in_stride` floats), then ReLU when `relu`; kernel [in, out] row-major.
void MlpDense(const float* in, size_t in_stride, size_t rows,
              const float* kernel, const float* bias,
              const MlpLayerShape& layer, bool relu, float* out);

// The class the network predicts from its two logits.
inline int MlpPredictedClass(const float* logits) {
  return logits[1] > logits[0] ? 1 : 0;
}

// The fraction of `examples` that the network with `params` classifies
// right, computed on the host: `params` holds the float32 values of
// CreateMlpVariables' variables in its order (a model read back after
// training). INVALID_ARGUMENT when one is missing or of the wrong size.
absl::StatusOr<double> MlpAccuracy(
    int hidden, const std::vector<std::span<const float>>& params,
    const std::vector<SpiralExample>& examples);

// This replica's share of the held-out set: examples r, r + n, r + 2n, ...
// of config.eval_examples generated from seed + kHeldOutSeedOffset.
std::vector<SpiralExample> HeldOutShard(const MlpConfig& config, uint64_t seed,
                                        int replica, int num_replicas);

// The batch as float32 rows [x0, x1, label] in `rows` (3 * size() values);
// INVALID_ARGUMENT when an element is not such a row. `step_name` prefixes
// the message.
absl::Status PackSpiralBatch(const Batch& batch, const char* step_name,
                             std::vector<float>& rows);

// The dataset function: the train-*.rec files of config "data_dir", sorted.
absl::StatusOr<std::unique_ptr<Dataset>> OpenSpiralRecords(
    const InputContext& input);
// The same, with each replica's batch prefetched into its device memory.
absl::StatusOr<std::unique_ptr<Dataset>> OpenSpiralRecordsToDevice(
    const InputContext& input);

}  // namespace cohort::examples
