#pragma once

// The Fashion-MNIST libraries' training data set: the record files of
// cohort-example-fmnist-data in config "data_dir".

#include <memory>

#include "absl/status/statusor.h"
#include "cohort/dataset.h"

namespace cohort::examples {

// With the config's shard policy and shuffle; `to_device` prefetches each
// batch into the replica's device memory (the CUDA library's).
absl::StatusOr<std::unique_ptr<Dataset>> OpenFashionRecords(
    const InputContext& input, bool to_device);

}  // namespace cohort::examples
