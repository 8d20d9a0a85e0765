// The Fashion-MNIST step libraries on the examples' fake runtime: the CPU
// one learns from a small slice of the real data set (when installed), and
// names its bad config fields; the CUDA one asks for a CUDA device.

#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "cohort/dataset.h"
#include "examples/fashion_mnist/idx_file.h"
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
  return StepLibrary::OpenOnce(COHORT_EXAMPLE_FMNIST_LIBRARY);
}

// The first 4096 training images, in 2 record files.
class FashionLibraryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kFashionMnistDir)) return;
    dir_ = new std::string(::testing::TempDir() + "/cohort_fmnist_test_" +
                           std::to_string(::getpid()));
    std::filesystem::create_directories(*dir_);
    absl::StatusOr<FashionMnistSplit> train =
        ReadFashionMnist(kFashionMnistDir, "train");
    ASSERT_TRUE(train.ok()) << train.status();
    for (int f = 0; f < 2; ++f) {
      absl::StatusOr<std::unique_ptr<RecordWriter>> writer =
          RecordWriter::Create(*dir_ + "/train-0000" + std::to_string(f) +
                               "-of-00002.rec");
      ASSERT_TRUE(writer.ok()) << writer.status();
      for (int i = f * 2048; i < (f + 1) * 2048; ++i) {
        ASSERT_TRUE(
            (*writer)
                ->Write(std::string_view(
                    train->examples.data() + i * kExampleBytes, kExampleBytes))
                .ok());
      }
      ASSERT_TRUE((*writer)->Close().ok());
    }
  }
  static void TearDownTestSuite() {
    if (dir_ == nullptr) return;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    if (dir_ == nullptr) GTEST_SKIP() << kFashionMnistDir << " is absent";
  }

  static FakeJobOptions Job(int replicas, int64_t steps) {
    return {.init_fn = "fmnist_init",
            .step_fn = "fmnist_step",
            .dataset_fn = "fmnist_data",
            .replicas = replicas,
            .steps = steps,
            .global_batch_size = 64,
            .seed = 1,
            .config_json = R"({"data_dir": ")" + *dir_ +
                           R"(", "test_examples": 2000, "eval_every": 50})"};
  }

  static std::string* dir_;
};

std::string* FashionLibraryTest::dir_ = nullptr;

TEST_F(FashionLibraryTest, TwoReplicasLearnTheClothes) {
  absl::StatusOr<FakeJobResult> result = RunFakeJob(Library(), Job(2, 200));
  ASSERT_TRUE(result.ok()) << result.status();
  const auto& loss = result->metrics.at("loss");
  ASSERT_FALSE(loss.empty());
  EXPECT_LT(result->Last("loss"), loss.front().second / 2);
  // Ten classes: chance is 0.1. Each replica reports its share.
  EXPECT_GT(result->Last("accuracy"), 0.3);
  // Mirrored variables stayed equal.
  EXPECT_EQ(result->variables[0], result->variables[1]);
}

TEST_F(FashionLibraryTest, BadConfigNamesTheField) {
  for (const char* field :
       {"hidden1", "hidden2", "learning_rate", "eval_every", "test_examples",
        "blas_threads", "shuffle", "shard_policy", "source_dir"}) {
    FakeJobOptions job = Job(1, 1);
    job.config_json =
        R"({"data_dir": ")" + *dir_ + R"(", ")" + field + R"(": -1})";
    absl::StatusOr<FakeJobResult> result = RunFakeJob(Library(), job);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << field;
    EXPECT_THAT(result.status().message(),
                HasSubstr("\"" + std::string(field) + "\""));
  }
  // A misspelt field is named, not ignored.
  FakeJobOptions job = Job(1, 1);
  job.config_json = R"({"data_dir": ")" + *dir_ + R"(", "learning_rte": 0.1})";
  EXPECT_THAT(RunFakeJob(Library(), job).status().message(),
              HasSubstr("config field \"learning_rte\" is not one this example "
                        "reads (data_dir, source_dir, "));
}

TEST_F(FashionLibraryTest, AMissingTestSetIsNamed) {
  FakeJobOptions job = Job(1, 1);
  job.config_json =
      R"({"data_dir": ")" + *dir_ + R"(", "source_dir": "/nonexistent"})";
  absl::StatusOr<FakeJobResult> result = RunFakeJob(Library(), job);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(
      result.status().message(),
      HasSubstr("/nonexistent/t10k-images-idx3-ubyte.gz: no such file"));
}

#ifdef COHORT_EXAMPLE_FMNIST_CUDA_LIBRARY
TEST_F(FashionLibraryTest, CudaLibraryNeedsACudaDevice) {
  absl::StatusOr<std::unique_ptr<StepLibrary>> cuda =
      StepLibrary::Open(COHORT_EXAMPLE_FMNIST_CUDA_LIBRARY);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  FakeJobOptions job = Job(1, 1);
  job.init_fn = "fmnist_cuda_init";
  job.step_fn = "fmnist_cuda_step";
  job.dataset_fn = "fmnist_cuda_data";
  absl::StatusOr<FakeJobResult> result = RunFakeJob(**cuda, job);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("CUDA device"));
}
#endif

}  // namespace
}  // namespace cohort::examples
