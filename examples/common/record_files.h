#pragma once

// Finding an example's training record files.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort::examples {

// The train-*.rec files of `dir`, sorted. NOT_FOUND naming the directory
// (and `maker`, the tool that writes them) when it cannot be listed or has
// none; FAILED_PRECONDITION when they are not one whole set
// train-00000-of-N.rec ... train-(N-1)-of-N.rec (files of two runs, say).
absl::StatusOr<std::vector<std::string>> TrainRecordFiles(
    const std::string& dir, const std::string& maker);

}  // namespace cohort::examples
