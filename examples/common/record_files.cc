#include "examples/common/record_files.h"

#include <algorithm>
#include <filesystem>

namespace cohort::examples {

absl::StatusOr<std::vector<std::string>> TrainRecordFiles(
    const std::string& dir, const std::string& maker) {
  if (dir.empty()) {
    return absl::InvalidArgumentError(
        "config field \"data_dir\" is required: the directory that " + maker +
        " --out=DIR wrote");
  }
  std::error_code error;
  std::vector<std::string> files;
  for (std::filesystem::directory_iterator it(dir, error), end;
       !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with("train-") && name.ends_with(".rec")) {
      files.push_back(it->path().string());
    }
  }
  if (error) {
    return absl::NotFoundError("config field \"data_dir\": cannot list " +
                               dir + ": " + error.message());
  }
  if (files.empty()) {
    return absl::NotFoundError("config field \"data_dir\": no train-*.rec "
                               "files in " +
                               dir + "; make them with " + maker +
                               " --out=" + dir);
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace cohort::examples
