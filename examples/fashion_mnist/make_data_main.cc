// cohort-example-fmnist-data: converts Fashion-MNIST's gzipped IDX training
// set into record files for the fmnist example, one record per image: the
// label byte, then the 784 pixel bytes.

#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "cohort/dataset.h"
#include "common/flags.h"
#include "examples/fashion_mnist/idx_file.h"

ABSL_FLAG(std::string, source, cohort::examples::kFashionMnistDir,
          "Directory of the gzipped IDX files (dataset-fashion-mnist).");
ABSL_FLAG(std::string, out, "", "Directory to write the record files to.");
ABSL_FLAG(int, files, 8, "Number of files to split the examples over.");

namespace {

constexpr char kUsage[] =
    "converts Fashion-MNIST's training set into record files for the fmnist\n"
    "example step library.\n"
    "\n"
    "  cohort-example-fmnist-data --out=/tmp/fmnist [--files=8]\n"
    "      [--source=/usr/share/datasets/fashion-mnist]\n"
    "\n"
    "Writes DIR/train-00000-of-00008.rec ...; each record is a label byte\n"
    "and 28x28 pixel bytes. Train on them with --dataset=fmnist_data and\n"
    "--config='{\"data_dir\":\"DIR\"}'; the test set is read from --source.";

absl::Status WriteFiles(const std::string& source, const std::string& dir,
                        int files) {
  absl::StatusOr<cohort::examples::FashionMnistSplit> train =
      cohort::examples::ReadFashionMnist(source, "train");
  if (!train.ok()) return train.status();
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot create %s: %s", dir, error.message()));
  }
  const int64_t n = train->count;
  for (int f = 0; f < files; ++f) {
    const std::string path =
        absl::StrFormat("%s/train-%05d-of-%05d.rec", dir, f, files);
    absl::StatusOr<std::unique_ptr<cohort::RecordWriter>> writer =
        cohort::RecordWriter::Create(path);
    if (!writer.ok()) return writer.status();
    // Contiguous ranges: the IDX order is already shuffled over classes.
    const int64_t begin = n * f / files;
    const int64_t end = n * (f + 1) / files;
    for (int64_t i = begin; i < end; ++i) {
      absl::Status s = (*writer)->Write(std::string_view(
          train->examples.data() +
              static_cast<size_t>(i) * cohort::examples::kExampleBytes,
          cohort::examples::kExampleBytes));
      if (!s.ok()) return s;
    }
    if (absl::Status s = (*writer)->Close(); !s.ok()) return s;
    std::printf("wrote %s (%lld examples)\n", path.c_str(),
                static_cast<long long>(end - begin));
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args =
      cohort::ParseCommandLine(argc, argv, kUsage);
  const std::string out = absl::GetFlag(FLAGS_out);
  const int files = absl::GetFlag(FLAGS_files);
  if (!args.empty()) {
    cohort::ExitWithConfigError(absl::InvalidArgumentError(
        "unexpected argument \"" + args[0] + "\" (see --help)"));
  }
  if (out.empty()) {
    cohort::ExitWithConfigError(
        absl::InvalidArgumentError("--out is required (see --help)"));
  }
  if (files < 1 || files > 1000) {
    cohort::ExitWithConfigError(absl::InvalidArgumentError(
        absl::StrFormat("--files must be in [1, 1000], got %d", files)));
  }
  if (absl::Status s = WriteFiles(absl::GetFlag(FLAGS_source), out, files);
      !s.ok()) {
    std::fprintf(stderr, "cohort-example-fmnist-data: %s\n",
                 s.ToString().c_str());
    return 1;
  }
  return 0;
}
