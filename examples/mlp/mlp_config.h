#pragma once

// The MLP examples' settings, read from the job's config JSON; shared by the
// CPU and CUDA libraries.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "cohort/dataset.h"

namespace cohort::examples {

struct MlpConfig {
  std::string data_dir;  // train-*.rec from cohort-example-mlp-data
  ShardPolicy shard_policy = ShardPolicy::kAuto;
  bool shuffle = true;
  int hidden = 32;              // units of each of the two hidden layers
  double learning_rate = 0.01;  // Adam
  int64_t eval_examples = 2000;
  int64_t eval_every = 100;  // steps between held-out accuracy reports
};

// INVALID_ARGUMENT naming the field for a bad value. Keys: "data_dir",
// "shard_policy", "shuffle", "hidden", "learning_rate", "eval_examples",
// "eval_every". "data_dir" may be absent here; the dataset function needs it.
absl::StatusOr<MlpConfig> ParseMlpConfig(const std::string& json);

}  // namespace cohort::examples
