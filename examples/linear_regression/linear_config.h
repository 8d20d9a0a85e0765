#pragma once

// The linear regression example's settings, read from the job's config JSON,
// and the data set they describe: y = w·x + b without noise, so the trained
// weights can be checked against the true ones.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/dataset.h"
#include "cohort/step.h"

namespace cohort::examples {

struct LinearConfig {
  int64_t num_examples = 4096;
  int dim = 8;
  std::vector<double> true_w;  // dim weights
  double true_b = 0.3;
  ShardPolicy shard_policy = ShardPolicy::kData;
  bool shuffle = false;
  OptimizerOptions optimizer{.kind = OptimizerKind::kSgd, .learning_rate = 0.1};
  // Extra time each step takes, to stand in for a heavier model (tests use
  // it to act in the middle of a job).
  int step_sleep_ms = 0;
  // When set, steps sleep only until this file exists: tests keep a job
  // slow until they have acted on it, then let it finish at full speed.
  std::string step_sleep_until_file;
  // The step that never returns, as a step stuck in a deadlock would (tests
  // use it to stop a job whose code cannot be interrupted); -1: none.
  int64_t hang_at_step = -1;
  // linear_stream: how many examples the stream yields; 0, endlessly.
  int64_t stream_examples = 0;
  // tf.distribute.InputOptions for either input.
  int prefetch_steps = 1;
  bool prefetch_to_device = false;
};

// INVALID_ARGUMENT naming the field for a bad value. Keys: "num_examples",
// "dim", "true_w", "true_b", "shard_policy", "shuffle", "optimizer",
// "learning_rate", "step_sleep_ms", "step_sleep_until_file", "hang_at_step",
// "stream_examples",
// "prefetch_steps", "prefetch_to_device".
absl::StatusOr<LinearConfig> ParseLinearConfig(const std::string& json);

// Examples of dim + 1 float64 values [x..., y] with x uniform in [-1, 1),
// one after another; the same sequence for the same seed on every machine.
// Keeps a reference to `config`, which outlives it.
class LinearExamples {
 public:
  LinearExamples(const LinearConfig& config, uint64_t seed);
  std::string Next();

 private:
  const LinearConfig& config_;
  std::mt19937_64 rng_;
  std::vector<double> values_;
};

// The first config.num_examples of LinearExamples(config, seed).
std::vector<std::string> GenerateLinearData(const LinearConfig& config,
                                            uint64_t seed);

}  // namespace cohort::examples
