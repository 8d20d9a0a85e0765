#include "examples/mlp/mlp_model.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "examples/common/record_files.h"

namespace cohort::examples {

std::array<MlpLayerShape, kMlpLayers> MlpShape(int hidden) {
  return {{{kMlpInputs, hidden}, {hidden, hidden}, {hidden, kMlpClasses}}};
}

int MlpLayerDevice(int layer, int num_logical_devices) {
  return std::min(num_logical_devices - 1,
                  layer * num_logical_devices / kMlpLayers);
}

absl::StatusOr<std::vector<Variable*>> CreateMlpVariables(ReplicaContext& ctx,
                                                          int hidden,
                                                          bool split) {
  std::mt19937_64 rng(ctx.seed());
  std::vector<Variable*> variables;
  int k = 0;
  for (const MlpLayerShape& layer : MlpShape(hidden)) {
    const int device = split ? MlpLayerDevice(k, ctx.num_logical_devices()) : 0;
    const std::string prefix = "dense" + std::to_string(k++);
    // Glorot uniform, as Keras' default: limit sqrt(6 / (fan_in + fan_out)).
    const double limit = std::sqrt(6.0 / (layer.in + layer.out));
    std::vector<float> kernel(static_cast<size_t>(layer.in) * layer.out);
    for (float& w : kernel) {
      w = static_cast<float>(
          (2.0 * static_cast<double>(rng() >> 11) * 0x1.0p-53 - 1.0) * limit);
    }
    absl::StatusOr<Variable*> kernel_var =
        ctx.create_variable({.name = prefix + "/kernel",
                             .shape = {layer.in, layer.out},
                             .dtype = DType::kFloat32,
                             .logical_device = device},
                            kernel.data());
    if (!kernel_var.ok()) return kernel_var.status();
    absl::StatusOr<Variable*> bias_var =
        ctx.create_variable({.name = prefix + "/bias",
                             .shape = {layer.out},
                             .dtype = DType::kFloat32,
                             .logical_device = device},
                            nullptr);
    if (!bias_var.ok()) return bias_var.status();
    variables.push_back(*kernel_var);
    variables.push_back(*bias_var);
  }
  return variables;
}

void MlpDense(const float* in, size_t in_stride, size_t rows,
              const float* kernel, const float* bias,
              const MlpLayerShape& layer, bool relu, float* out) {
  for (size_t b = 0; b < rows; ++b) {
    float* o = out + b * layer.out;
    std::copy_n(bias, layer.out, o);
    for (int i = 0; i < layer.in; ++i) {
      const float x = in[b * in_stride + i];
      const float* w = kernel + static_cast<size_t>(i) * layer.out;
      for (int j = 0; j < layer.out; ++j) o[j] += x * w[j];
    }
    if (relu) {
      for (int j = 0; j < layer.out; ++j) o[j] = std::max(o[j], 0.0f);
    }
  }
}

absl::StatusOr<double> MlpAccuracy(
    int hidden, const std::vector<std::span<const float>>& params,
    const std::vector<SpiralExample>& examples) {
  const std::array<MlpLayerShape, kMlpLayers> shape = MlpShape(hidden);
  if (params.size() != 2 * kMlpLayers) {
    return absl::InvalidArgumentError(
        "MlpAccuracy: " + std::to_string(params.size()) +
        " parameter arrays, expected " + std::to_string(2 * kMlpLayers));
  }
  for (int k = 0; k < kMlpLayers; ++k) {
    const size_t kernel = static_cast<size_t>(shape[k].in) * shape[k].out;
    if (params[2 * k].size() != kernel ||
        params[2 * k + 1].size() != static_cast<size_t>(shape[k].out)) {
      return absl::InvalidArgumentError(
          "MlpAccuracy: layer " + std::to_string(k) + " has " +
          std::to_string(params[2 * k].size()) + " + " +
          std::to_string(params[2 * k + 1].size()) + " values, expected " +
          std::to_string(kernel) + " + " + std::to_string(shape[k].out));
    }
  }
  if (examples.empty()) return 0.0;
  // The examples are rows [x0, x1, label], as a batch is.
  const size_t rows = examples.size();
  const float* in = examples.front().data();
  size_t stride = 3;
  std::array<std::vector<float>, kMlpLayers> outputs;
  for (int k = 0; k < kMlpLayers; ++k) {
    outputs[k].resize(rows * shape[k].out);
    MlpDense(in, stride, rows, params[2 * k].data(), params[2 * k + 1].data(),
             shape[k], k + 1 < kMlpLayers, outputs[k].data());
    in = outputs[k].data();
    stride = static_cast<size_t>(shape[k].out);
  }
  size_t correct = 0;
  for (size_t b = 0; b < rows; ++b) {
    correct += MlpPredictedClass(&outputs.back()[kMlpClasses * b]) ==
               static_cast<int>(examples[b][2]);
  }
  return static_cast<double>(correct) / static_cast<double>(rows);
}

std::vector<SpiralExample> HeldOutShard(const MlpConfig& config, uint64_t seed,
                                        int replica, int num_replicas) {
  const std::vector<SpiralExample> all =
      GenerateSpirals(config.eval_examples, seed + kHeldOutSeedOffset);
  std::vector<SpiralExample> shard;
  for (size_t i = static_cast<size_t>(replica); i < all.size();
       i += static_cast<size_t>(num_replicas)) {
    shard.push_back(all[i]);
  }
  return shard;
}

absl::Status PackSpiralBatch(const Batch& batch, const char* step_name,
                             std::vector<float>& rows) {
  rows.resize(batch.size() * 3);
  for (size_t n = 0; n < batch.size(); ++n) {
    const std::string_view e = batch.element(n);
    if (e.size() != kSpiralExampleBytes) {
      return absl::InvalidArgumentError(
          std::string(step_name) + ": an element of " +
          std::to_string(e.size()) +
          " bytes, expected float32 [x0, x1, label] (12 bytes); is the data "
          "set made by cohort-example-mlp-data?");
    }
    std::copy_n(reinterpret_cast<const char*>(e.data()), kSpiralExampleBytes,
                reinterpret_cast<char*>(&rows[3 * n]));
    const float label = rows[3 * n + 2];
    if (label != 0.0f && label != 1.0f) {
      return absl::InvalidArgumentError(
          std::string(step_name) + ": an element with label " +
          std::to_string(label) + ", expected 0 or 1");
    }
  }
  return absl::OkStatus();
}

namespace {

absl::StatusOr<std::unique_ptr<Dataset>> OpenSpirals(const InputContext& input,
                                                     bool to_device) {
  absl::StatusOr<MlpConfig> config = ParseMlpConfig(input.config_json());
  if (!config.ok()) return config.status();
  absl::StatusOr<std::vector<std::string>> files =
      TrainRecordFiles(config->data_dir, "cohort-example-mlp-data");
  if (!files.ok()) return files.status();
  return input.OpenRecordFiles(*files, {.shard_policy = config->shard_policy,
                                       .shuffle = config->shuffle,
                                       .prefetch_to_device = to_device});
}

}  // namespace

absl::StatusOr<std::unique_ptr<Dataset>> OpenSpiralRecords(
    const InputContext& input) {
  return OpenSpirals(input, /*to_device=*/false);
}

absl::StatusOr<std::unique_ptr<Dataset>> OpenSpiralRecordsToDevice(
    const InputContext& input) {
  return OpenSpirals(input, /*to_device=*/true);
}

}  // namespace cohort::examples
