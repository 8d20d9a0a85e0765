#pragma once

// The data sets behind InputContext::OpenRecordFiles, the agent's and the
// examples' test runtime's: record files read whole into memory, keeping
// which elements each file holds so that FILE sharding can split by file.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/dataset.h"

namespace cohort {

// Every record of `files`, in file order, as one data set (immutable, so
// thread-safe) with num_files() == files.size(). INVALID_ARGUMENT for an
// empty list; NOT_FOUND or DATA_LOSS naming the file that is missing or
// corrupt.
absl::StatusOr<std::unique_ptr<Dataset>> OpenRecordFiles(
    const std::vector<std::string>& files, DatasetOptions options);

}  // namespace cohort
