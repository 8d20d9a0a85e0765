#pragma once

// Finding an example's training record files.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort::examples {

// The train-*.rec files of `dir`, sorted. NOT_FOUND naming the directory
// (and `maker`, the tool that writes them) when it cannot be listed or has
// none.
absl::StatusOr<std::vector<std::string>> TrainRecordFiles(
    const std::string& dir, const std::string& maker);

}  // namespace cohort::examples
