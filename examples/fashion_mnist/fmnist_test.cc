// The Fashion-MNIST example's parts: the IDX reader against good, missing,
// truncated and mislabelled files (and the installed data set, when there),
// and the model's gradients against finite differences.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "examples/fashion_mnist/fmnist_model.h"
#include "examples/fashion_mnist/idx_file.h"
#include "tests/testing/status_matchers.h"

namespace cohort::examples {
namespace {

using ::cohort::testing::StatusIs;
using ::testing::HasSubstr;

std::string BigEndian(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
          static_cast<char>(v >> 8), static_cast<char>(v)};
}

class IdxFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/idx-", getpid(), "-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void WriteGz(const std::string& name, const std::string& bytes) {
    gzFile f = gzopen((dir_ + "/" + name).c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  }
  // `n` images whose pixels all hold their index, and labels i % 10.
  void WriteSplit(const std::string& split, uint32_t n,
                  uint32_t image_magic = 0x803, uint32_t labels = 0) {
    std::string images = BigEndian(image_magic) + BigEndian(n) +
                         BigEndian(28) + BigEndian(28);
    for (uint32_t i = 0; i < n; ++i) images.append(kImagePixels, char(i));
    WriteGz(split + "-images-idx3-ubyte.gz", images);
    const uint32_t count = labels > 0 ? labels : n;
    std::string label_bytes = BigEndian(0x801) + BigEndian(count);
    for (uint32_t i = 0; i < count; ++i) label_bytes.push_back(char(i % 10));
    WriteGz(split + "-labels-idx1-ubyte.gz", label_bytes);
  }

  std::string dir_;
};

TEST_F(IdxFileTest, ReadsImagesAndLabelsIntoExamples) {
  WriteSplit("train", 12);
  absl::StatusOr<FashionMnistSplit> split = ReadFashionMnist(dir_, "train");
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->count, 12);
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(split->label(i), i % 10);
    EXPECT_EQ(split->pixels(i)[0], i);
    EXPECT_EQ(split->pixels(i)[kImagePixels - 1], i);
  }
}

TEST_F(IdxFileTest, AMissingFileIsNamed) {
  EXPECT_THAT(ReadFashionMnist(dir_, "t10k"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr(dir_ + "/t10k-images-idx3-ubyte.gz: no such "
                                        "file")));
}

TEST_F(IdxFileTest, ATruncatedGzipIsDataLossNamingTheFile) {
  WriteSplit("train", 50);
  const std::string path = dir_ + "/train-images-idx3-ubyte.gz";
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  EXPECT_THAT(ReadFashionMnist(dir_, "train"),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr(path + ": truncated or corrupt gzip file")));
}

TEST_F(IdxFileTest, AWrongMagicNumberIsDataLossNamingBoth) {
  WriteSplit("train", 3, /*image_magic=*/0x801);
  EXPECT_THAT(
      ReadFashionMnist(dir_, "train"),
      StatusIs(absl::StatusCode::kDataLoss,
               HasSubstr("train-images-idx3-ubyte.gz: magic number "
                         "0x00000801, expected 0x00000803 (IDX images)")));
}

TEST_F(IdxFileTest, CountsThatDisagreeAreDataLoss) {
  WriteSplit("train", 5, 0x803, /*labels=*/4);
  EXPECT_THAT(ReadFashionMnist(dir_, "train"),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("holds 4 labels and ")));
}

TEST_F(IdxFileTest, AnEmptySplitIsDataLoss) {
  WriteSplit("t10k", 0);
  EXPECT_THAT(ReadFashionMnist(dir_, "t10k"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("no images")));
}

TEST(FashionMnistPackageTest, TheInstalledTestSetHasTenThousandImages) {
  if (!std::filesystem::exists(kFashionMnistDir)) {
    GTEST_SKIP() << kFashionMnistDir << " is absent (dataset-fashion-mnist)";
  }
  absl::StatusOr<FashionMnistSplit> test =
      ReadFashionMnist(kFashionMnistDir, "t10k");
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->count, 10000);
  std::vector<int> per_class(kFashionClasses);
  for (int64_t i = 0; i < test->count; ++i) ++per_class[test->label(i)];
  for (int c = 0; c < kFashionClasses; ++c) EXPECT_EQ(per_class[c], 1000) << c;
}

TEST(FashionMlpTest, GradientsMatchFiniteDifferences) {
  const FashionConfig config{.hidden1 = 6, .hidden2 = 5};
  const auto shape = FashionShape(config);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-0.3f, 0.3f);
  std::vector<std::vector<float>> values;
  for (const DenseShape& d : shape) {
    values.emplace_back(static_cast<size_t>(d.in) * d.out);
    values.emplace_back(static_cast<size_t>(d.out));
  }
  for (auto& v : values) {
    for (float& x : v) x = uniform(rng);
  }
  std::string examples;
  for (int b = 0; b < 4; ++b) {
    examples.push_back(static_cast<char>(b * 3 % 10));
    for (int p = 0; p < kImagePixels; ++p) {
      examples.push_back(static_cast<char>(rng() % 256));
    }
  }
  FashionMlp model(config);
  ASSERT_TRUE(
      model.Load(reinterpret_cast<const uint8_t*>(examples.data()), 4).ok());
  auto params = [&] {
    std::vector<const float*> p;
    for (auto& v : values) p.push_back(v.data());
    return p;
  };
  std::vector<std::vector<float>> gradients;
  for (auto& v : values) gradients.emplace_back(v.size());
  model.Forward(params());
  model.Backward(params(), gradients);

  std::vector<std::vector<float>> scratch = gradients;
  auto loss = [&] {
    model.Forward(params());
    return model.Backward(params(), scratch);
  };
  // A few entries of every variable, by central differences in float32:
  // agreement to a few percent shows the backward pass is the loss's.
  for (size_t v = 0; v < values.size(); ++v) {
    for (size_t i = 0; i < values[v].size(); i += values[v].size() / 3 + 1) {
      const float saved = values[v][i];
      const float h = 1e-2f;
      values[v][i] = saved + h;
      const double up = loss();
      values[v][i] = saved - h;
      const double down = loss();
      values[v][i] = saved;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(gradients[v][i], numeric,
                  0.05 * std::abs(numeric) + 2e-4)
          << "variable " << v << " entry " << i;
    }
  }
}

// Both the CPU and the CUDA step check each element this way; the CUDA
// kernels would read past a row of logits for a label above 9.
TEST(FashionExampleTest, AWrongSizeOrALabelAboveNineIsNamed) {
  std::string example(kExampleBytes, '\0');
  example[0] = 9;
  EXPECT_TRUE(CheckExample(example, 0, "fmnist").ok());
  example[0] = 10;
  EXPECT_THAT(CheckExample(example, 3, "fmnist_cuda_step"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("fmnist_cuda_step: element 3 has label 10")));
  example[0] = static_cast<char>(200);
  EXPECT_THAT(CheckExample(example, 0, "fmnist"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("has label 200, expected 0 to 9")));
  EXPECT_THAT(CheckExample(example.substr(1), 5, "fmnist"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("element 5 of the batch has 784 bytes")));
}

}  // namespace
}  // namespace cohort::examples
