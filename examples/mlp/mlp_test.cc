#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "cohort/dataset.h"
#include "examples/mlp/spiral_data.h"
#include "examples/testing/fake_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort::examples {
namespace {

using ::cohort::examples::testing::FakeJobOptions;
using ::cohort::examples::testing::FakeJobResult;
using ::cohort::examples::testing::RunFakeJob;
using ::cohort::examples::testing::StepLibrary;
using ::testing::HasSubstr;

const StepLibrary& Library() {
  return StepLibrary::OpenOnce(COHORT_EXAMPLE_MLP_LIBRARY);
}

// The training files, as cohort-example-mlp-data writes them.
class MlpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "/cohort_mlp_test_" +
                           std::to_string(::getpid()));
    std::filesystem::create_directories(*dir_);
    const std::vector<SpiralExample> examples = GenerateSpirals(8192, 1);
    for (int f = 0; f < 4; ++f) {
      absl::StatusOr<std::unique_ptr<RecordWriter>> writer =
          RecordWriter::Create(*dir_ + "/train-0000" + std::to_string(f) +
                               "-of-00004.rec");
      ASSERT_TRUE(writer.ok()) << writer.status();
      for (int i = f * 2048; i < (f + 1) * 2048; ++i) {
        ASSERT_TRUE((*writer)->Write(EncodeSpiralExample(examples[i])).ok());
      }
      ASSERT_TRUE((*writer)->Close().ok());
    }
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static FakeJobOptions Job(int replicas) {
    return {.init_fn = "mlp_init",
            .step_fn = "mlp_step",
            .dataset_fn = "mlp_data",
            .replicas = replicas,
            .steps = 500,
            .global_batch_size = 128,
            .seed = 3,
            .config_json = R"({"data_dir": ")" + *dir_ + R"("})"};
  }

  static std::string* dir_;
};

std::string* MlpTest::dir_ = nullptr;

TEST_F(MlpTest, ReachesHeldOutAccuracy) {
  absl::StatusOr<FakeJobResult> result = RunFakeJob(Library(), Job(4));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GE(result->Last("accuracy"), 0.95);
  EXPECT_LT(result->Last("loss"), 0.3);
  // Every 100 steps, and the last.
  const auto& accuracy = result->metrics.at("accuracy");
  ASSERT_EQ(accuracy.size(), 5u);
  EXPECT_EQ(accuracy.front().first, 99);
  EXPECT_EQ(accuracy.back().first, 499);
  for (size_t r = 1; r < result->variables.size(); ++r) {
    EXPECT_EQ(result->variables[r], result->variables[0]) << "replica " << r;
  }
}

TEST_F(MlpTest, VariablesAreNamedAsKerasDense) {
  FakeJobOptions job = Job(1);
  job.steps = 1;
  job.config_json = R"({"data_dir": ")" + *dir_ + R"(", "hidden": 8})";
  absl::StatusOr<FakeJobResult> result = RunFakeJob(Library(), job);
  ASSERT_TRUE(result.ok()) << result.status();
  const auto& v = result->variables[0];
  EXPECT_EQ(v.at("dense0/kernel").size(), 2u * 8);
  EXPECT_EQ(v.at("dense0/bias").size(), 8u);
  EXPECT_EQ(v.at("dense1/kernel").size(), 8u * 8);
  EXPECT_EQ(v.at("dense2/kernel").size(), 8u * 2);
  EXPECT_EQ(v.at("dense2/bias").size(), 2u);
  EXPECT_EQ(v.size(), 6u);
}

TEST_F(MlpTest, DataDirIsRequired) {
  FakeJobOptions job = Job(1);
  job.config_json = "{}";
  absl::StatusOr<FakeJobResult> result = RunFakeJob(Library(), job);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("\"data_dir\""));
}

TEST_F(MlpTest, EmptyDataDirSaysHowToFillIt) {
  const std::string empty = *dir_ + "/empty";
  std::filesystem::create_directories(empty);
  FakeJobOptions job = Job(1);
  job.config_json = R"({"data_dir": ")" + empty + R"("})";
  absl::StatusOr<FakeJobResult> result = RunFakeJob(Library(), job);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(result.status().message(),
              HasSubstr("cohort-example-mlp-data --out="));
}

// Files of an earlier run with another count would be read as well.
TEST_F(MlpTest, TrainFilesOfTwoSetsAreRefused) {
  const std::string mixed = *dir_ + "/mixed";
  std::filesystem::create_directories(mixed);
  for (const char* name :
       {"/train-00000-of-00002.rec", "/train-00001-of-00002.rec",
        "/train-00002-of-00004.rec"}) {
    std::filesystem::copy_file(*dir_ + "/train-00000-of-00004.rec",
                               mixed + name);
  }
  FakeJobOptions job = Job(1);
  job.config_json = R"({"data_dir": ")" + mixed + R"("})";
  absl::StatusOr<FakeJobResult> result = RunFakeJob(Library(), job);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(),
              HasSubstr("does not hold one whole set"));
  EXPECT_THAT(result.status().message(), HasSubstr("train-00002-of-00004.rec"));
}

TEST_F(MlpTest, BadConfigNamesTheField) {
  for (const char* field : {"hidden", "learning_rate", "eval_every",
                            "eval_examples", "shuffle", "shard_policy"}) {
    FakeJobOptions job = Job(1);
    job.config_json =
        R"({"data_dir": ")" + *dir_ + R"(", ")" + field + R"(": "x"})";
    absl::StatusOr<FakeJobResult> result = RunFakeJob(Library(), job);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << field;
    EXPECT_THAT(result.status().message(),
                HasSubstr("\"" + std::string(field) + "\""));
  }
  // A misspelt field is named, not ignored.
  FakeJobOptions job = Job(1);
  job.config_json = R"({"data_dir": ")" + *dir_ + R"(", "hiden": 8})";
  EXPECT_THAT(RunFakeJob(Library(), job).status().message(),
              HasSubstr("config field \"hiden\" is not one this example "
                        "reads (data_dir, shuffle, "));
}

#ifdef COHORT_EXAMPLE_MLP_CUDA_LIBRARY
TEST_F(MlpTest, CudaLibraryNeedsACudaDevice) {
  absl::StatusOr<std::unique_ptr<StepLibrary>> cuda =
      StepLibrary::Open(COHORT_EXAMPLE_MLP_CUDA_LIBRARY);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  FakeJobOptions job = Job(1);
  job.init_fn = "mlp_cuda_init";
  job.step_fn = "mlp_cuda_step";
  job.dataset_fn = "mlp_cuda_data";
  absl::StatusOr<FakeJobResult> result = RunFakeJob(**cuda, job);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("CUDA device"));
}
#endif

}  // namespace
}  // namespace cohort::examples
