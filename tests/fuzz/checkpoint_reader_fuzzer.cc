// The checkpoint reader, as an agent resuming a job meets a checkpoint
// directory: its `latest` file, then the step's manifest and data file. The
// input is three frames (fuzz_input.h): latest, manifest, data.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/checkpoint.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/scratch_file.h"

namespace {

void Write(const std::string& path, std::string_view bytes) {
  cohort::fuzz::WriteScratch(
      path, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    std::string path = cohort::fuzz::ScratchPath("checkpoint");
    mkdir(path.c_str(), 0700);
    return path;
  }();
  cohort::fuzz::FuzzInput input(data, size);
  uint8_t kind;
  std::string_view latest, manifest, contents;
  if (!input.Next(&kind, &latest)) return 0;
  input.Next(&kind, &manifest);
  input.Next(&kind, &contents);
  Write(dir + "/latest", latest);
  const absl::StatusOr<int64_t> step = cohort::LatestCheckpointStep(dir);
  if (!step.ok()) return 0;
  const std::string manifest_path = absl::StrCat(dir, "/ckpt-", *step, ".json");
  const std::string data_path = absl::StrCat(dir, "/ckpt-", *step, ".data");
  Write(manifest_path, manifest);
  Write(data_path, contents);
  (void)cohort::ReadCheckpoint(dir, *step);
  unlink(manifest_path.c_str());
  unlink(data_path.c_str());
  return 0;
}
