#include "examples/common/record_files.h"

#include <algorithm>
#include <cstdio>
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
  // One whole set, as the tools write it: train-00000-of-N.rec to
  // train-(N-1)-of-N.rec. Files left by an earlier run with another count
  // would otherwise be read too, repeating or mixing examples.
  const std::string first = std::filesystem::path(files[0]).filename();
  int count = 0;
  if (std::sscanf(first.c_str(), "train-%*5d-of-%5d.rec", &count) != 1 ||
      count != static_cast<int>(files.size())) {
    count = -1;
  }
  for (size_t i = 0; i < files.size() && count > 0; ++i) {
    char expected[64];
    std::snprintf(expected, sizeof(expected), "train-%05zu-of-%05d.rec", i,
                  count);
    if (std::filesystem::path(files[i]).filename() != expected) count = -1;
  }
  if (count < 0) {
    std::string names;
    for (const std::string& f : files) {
      names += (names.empty() ? "" : ", ") +
               std::filesystem::path(f).filename().string();
    }
    return absl::FailedPreconditionError(
        "config field \"data_dir\": " + dir +
        " does not hold one whole set of train-NNNNN-of-MMMMM.rec files (" +
        names + "); write them again with " + maker +
        " --out=DIR into an empty directory");
  }
  return files;
}

}  // namespace cohort::examples
