#include "examples/fashion_mnist/fmnist_data.h"

#include <string>
#include <vector>

#include "examples/common/record_files.h"
#include "examples/fashion_mnist/fmnist_config.h"

namespace cohort::examples {

absl::StatusOr<std::unique_ptr<Dataset>> OpenFashionRecords(
    const InputContext& input, bool to_device) {
  absl::StatusOr<FashionConfig> config = ParseFashionConfig(input.config_json());
  if (!config.ok()) return config.status();
  absl::StatusOr<std::vector<std::string>> files =
      TrainRecordFiles(config->data_dir, "cohort-example-fmnist-data");
  if (!files.ok()) return files.status();
  return input.OpenRecordFiles(*files, {.shard_policy = config->shard_policy,
                                        .shuffle = config->shuffle,
                                        .prefetch_to_device = to_device});
}

}  // namespace cohort::examples
