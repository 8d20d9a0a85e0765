// cohort-example-mlp-data: writes the spiral training set of the MLP examples
// as record files, float32 [x0, x1, label] per record.

#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cohort/dataset.h"
#include "common/flags.h"
#include "examples/mlp/spiral_data.h"

ABSL_FLAG(std::string, out, "", "Directory to write the record files to.");
ABSL_FLAG(int, files, 4, "Number of files to split the examples over.");
ABSL_FLAG(int64_t, examples, 8192, "Number of training examples.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the generator.");

namespace {

constexpr char kUsage[] =
    "writes the two-spirals training set of the MLP example step libraries.\n"
    "\n"
    "  cohort-example-mlp-data --out=/tmp/spirals [--files=4] "
    "[--examples=8192] [--seed=1]\n"
    "\n"
    "Writes DIR/train-00000-of-00004.rec ...; each record is float32\n"
    "[x0, x1, label]. Train on them with --dataset=mlp_data and\n"
    "--config='{\"data_dir\":\"DIR\"}'.";

absl::Status WriteFiles(const std::string& dir, int files, int64_t examples,
                        uint64_t seed) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot create %s: %s", dir, error.message()));
  }
  const std::vector<cohort::examples::SpiralExample> all =
      cohort::examples::GenerateSpirals(examples, seed);
  for (int f = 0; f < files; ++f) {
    const std::string path =
        absl::StrFormat("%s/train-%05d-of-%05d.rec", dir, f, files);
    absl::StatusOr<std::unique_ptr<cohort::RecordWriter>> writer =
        cohort::RecordWriter::Create(path);
    if (!writer.ok()) return writer.status();
    // Contiguous ranges; both labels alternate through every range.
    const int64_t begin = examples * f / files;
    const int64_t end = examples * (f + 1) / files;
    for (int64_t i = begin; i < end; ++i) {
      absl::Status s = (*writer)->Write(
          cohort::examples::EncodeSpiralExample(all[static_cast<size_t>(i)]));
      if (!s.ok()) return s;
    }
    if (absl::Status s = (*writer)->Close(); !s.ok()) return s;
    std::printf("wrote %s (%lld examples)\n", path.c_str(),
                static_cast<long long>(end - begin));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args =
      cohort::ParseCommandLine(argc, argv, kUsage);
  const std::string out = absl::GetFlag(FLAGS_out);
  const int files = absl::GetFlag(FLAGS_files);
  const int64_t examples = absl::GetFlag(FLAGS_examples);
  if (!args.empty()) {
    cohort::ExitWithConfigError(absl::InvalidArgumentError(
        "unexpected argument \"" + args[0] + "\" (see --help)"));
  }
  if (out.empty()) {
    cohort::ExitWithConfigError(
        absl::InvalidArgumentError("--out is required (see --help)"));
  }
  if (files < 1 || files > 99999) {
    cohort::ExitWithConfigError(
        absl::InvalidArgumentError("--files must be in [1, 99999]"));
  }
  if (examples < files) {
    cohort::ExitWithConfigError(absl::InvalidArgumentError(
        "--examples must be at least --files, so that no file is empty"));
  }
  // The whole set is generated in memory first: 12 bytes an example.
  constexpr int64_t kMaxExamples = 100'000'000;
  if (examples > kMaxExamples) {
    cohort::ExitWithConfigError(absl::InvalidArgumentError(
        absl::StrCat("--examples=", examples, " is over the ", kMaxExamples,
                     " this generator holds in memory at once")));
  }
  if (absl::Status s =
          WriteFiles(out, files, examples, absl::GetFlag(FLAGS_seed));
      !s.ok()) {
    std::fprintf(stderr, "cohort-example-mlp-data: %s\n",
                 std::string(s.message()).c_str());
    return 1;
  }
  std::printf("%lld examples of two spirals, float32 [x0, x1, label], in %s\n",
              static_cast<long long>(examples), out.c_str());
  return 0;
}
