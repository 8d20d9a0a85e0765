#include "common/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "nlohmann/json.hpp"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Bytes(const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<SavedTensor> Model(float scale) {
  SavedTensor w{"dense/kernel",
                "float32",
                {2, 2},
                Bytes({1 * scale, 2 * scale, 3 * scale, 4 * scale})};
  SavedTensor b{"dense/bias", "float64", {1}, std::string(8, '\x01')};
  SavedTensor it{"optimizer0/iterations", "int64", {}, std::string(8, '\0')};
  return {w, b, it};
}

class CheckpointTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(
        testing::TempDir(), "/ckpt_",
        testing::UnitTest::GetInstance()->current_test_info()->name(), "_",
        getpid());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string File(int64_t step, const char* suffix) const {
    return absl::StrCat(dir_, "/ckpt-", step, suffix);
  }

  std::string dir_;
};

TEST_F(CheckpointTest, RoundTrip) {
  const std::vector<SavedTensor> written = Model(1);
  ASSERT_TRUE(WriteCheckpoint(dir_, 7, written).ok());
  absl::StatusOr<std::vector<SavedTensor>> read = ReadCheckpoint(dir_, 7);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), written.size());
  for (size_t i = 0; i < written.size(); ++i) {
    EXPECT_EQ((*read)[i].name, written[i].name);
    EXPECT_EQ((*read)[i].dtype, written[i].dtype);
    EXPECT_EQ((*read)[i].shape, written[i].shape);
    EXPECT_EQ((*read)[i].bytes, written[i].bytes);
  }
  absl::StatusOr<int64_t> latest = LatestCheckpointStep(dir_);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 7);
}

TEST_F(CheckpointTest, EmptyCheckpointRoundTrips) {
  ASSERT_TRUE(WriteCheckpoint(dir_, 0, {}).ok());
  absl::StatusOr<std::vector<SavedTensor>> read = ReadCheckpoint(dir_, 0);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->empty());
}

TEST_F(CheckpointTest, LatestMovesAndOldOnesArePruned) {
  for (int64_t step : {10, 20, 30, 40}) {
    ASSERT_TRUE(WriteCheckpoint(dir_, step, Model(step), /*keep=*/2).ok());
    EXPECT_EQ(*LatestCheckpointStep(dir_), step);
  }
  EXPECT_FALSE(fs::exists(File(10, ".json")));
  EXPECT_FALSE(fs::exists(File(10, ".data")));
  EXPECT_FALSE(fs::exists(File(20, ".json")));
  EXPECT_FALSE(fs::exists(File(20, ".data")));
  EXPECT_TRUE(fs::exists(File(30, ".json")));
  EXPECT_TRUE(fs::exists(File(40, ".data")));
  EXPECT_TRUE(ReadCheckpoint(dir_, 30).ok());
  EXPECT_EQ(ReadCheckpoint(dir_, 20).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CheckpointTest, StepsAreListedNewestFirstByTheirManifests) {
  EXPECT_TRUE(CheckpointSteps(dir_).empty());  // no directory yet
  for (int64_t step : {100, 300, 200}) {
    ASSERT_TRUE(WriteCheckpoint(dir_, step, Model(step), /*keep=*/5).ok());
  }
  fs::remove(File(200, ".json"));  // data without a manifest is no checkpoint
  EXPECT_THAT(CheckpointSteps(dir_), ::testing::ElementsAre(300, 100));
}

TEST_F(CheckpointTest, RewritingAnOlderStepKeepsIt) {
  ASSERT_TRUE(WriteCheckpoint(dir_, 50, Model(1), /*keep=*/1).ok());
  ASSERT_TRUE(WriteCheckpoint(dir_, 20, Model(2), /*keep=*/1).ok());
  EXPECT_EQ(*LatestCheckpointStep(dir_), 20);
  EXPECT_TRUE(ReadCheckpoint(dir_, 20).ok());
  EXPECT_FALSE(fs::exists(File(50, ".json")));
}

TEST_F(CheckpointTest, CorruptByteIsDataLoss) {
  ASSERT_TRUE(WriteCheckpoint(dir_, 3, Model(1)).ok());
  std::string data = *ReadFile(File(3, ".data"));
  data[5] ^= 0x40;
  ASSERT_TRUE(WriteFileAtomically(File(3, ".data"), data).ok());
  const absl::Status status = ReadCheckpoint(dir_, 3).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find(File(3, ".data")), absl::string_view::npos)
      << status;
  EXPECT_NE(status.message().find("CRC-32"), absl::string_view::npos) << status;
}

TEST_F(CheckpointTest, TruncatedDataIsDataLoss) {
  ASSERT_TRUE(WriteCheckpoint(dir_, 3, Model(1)).ok());
  fs::resize_file(File(3, ".data"), 10);
  const absl::Status status = ReadCheckpoint(dir_, 3).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("truncated"), absl::string_view::npos)
      << status;
}

TEST_F(CheckpointTest, ADataFileLargerThanItsManifestSaysIsRefusedUnread) {
  ASSERT_TRUE(WriteCheckpoint(dir_, 3, Model(1)).ok());
  // Sparse: 64 GiB that take no disk, and would take 64 GiB of memory if
  // read before the size check.
  fs::resize_file(File(3, ".data"), uint64_t{64} << 30);
  absl::Status status = ReadCheckpoint(dir_, 3).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(),
              ::testing::HasSubstr("overwritten: 68719476736 bytes"));
  // The same for a manifest.
  fs::resize_file(File(3, ".json"), uint64_t{64} << 30);
  status = ReadCheckpoint(dir_, 3).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(),
              ::testing::HasSubstr("68719476736 bytes, larger than any "
                                   "manifest"));
}

// A step pruned by a writer after the reader opened its files still reads
// whole: open files outlive their names.
TEST_F(CheckpointTest, FilesOpenedBeforeAPruneReadAsTheyWere) {
  ASSERT_TRUE(WriteCheckpoint(dir_, 3, Model(1)).ok());
  absl::StatusOr<FileToRead> data = FileToRead::Open(File(3, ".data"));
  ASSERT_TRUE(data.ok()) << data.status();
  for (int64_t step : {4, 5}) {
    ASSERT_TRUE(WriteCheckpoint(dir_, step, Model(step), /*keep=*/1).ok());
  }
  ASSERT_FALSE(fs::exists(File(3, ".data")));
  absl::StatusOr<std::string> bytes = data->ReadAll();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->size(), data->size());
  EXPECT_GT(bytes->size(), 0u);
}

TEST_F(CheckpointTest, BadManifestIsDataLoss) {
  ASSERT_TRUE(WriteCheckpoint(dir_, 3, Model(1)).ok());
  std::string manifest = *ReadFile(File(3, ".json"));
  ASSERT_TRUE(WriteFileAtomically(File(3, ".json"),
                                  manifest.substr(0, manifest.size() / 2))
                  .ok());
  absl::Status status = ReadCheckpoint(dir_, 3).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find(File(3, ".json")), absl::string_view::npos)
      << status;

  ASSERT_TRUE(WriteFileAtomically(File(3, ".json"),
                                  R"({"format": 1, "step": "3", "data_size": 0,
                      "data_crc32": 0, "tensors": []})")
                  .ok());
  EXPECT_EQ(ReadCheckpoint(dir_, 3).status().code(),
            absl::StatusCode::kDataLoss);

  ASSERT_TRUE(WriteFileAtomically(File(3, ".json"),
                                  R"({"format": 1, "step": 3, "data_size": 8,
                      "data_crc32": 0, "tensors": [{"name": "x",
                      "dtype": "float32", "shape": [2.5], "offset": 0,
                      "size": 8}]})")
                  .ok());
  EXPECT_EQ(ReadCheckpoint(dir_, 3).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointTest, AManifestWhoseTensorsDoNotTileTheDataIsDataLoss) {
  // Two float32 tensors of 8 bytes each, back to back in 16 bytes.
  const std::vector<SavedTensor> written = {
      {"a", "float32", {2}, Bytes({1, 2})},
      {"b", "float32", {2}, Bytes({3, 4})}};
  auto rewrite = [&](const std::string& tensors, int data_size) {
    ASSERT_TRUE(WriteCheckpoint(dir_, 3, written).ok());
    const std::string good = *ReadFile(File(3, ".json"));
    nlohmann::json manifest = nlohmann::json::parse(good);
    manifest["tensors"] = nlohmann::json::parse(tensors);
    manifest["data_size"] = data_size;
    ASSERT_TRUE(WriteFileAtomically(File(3, ".json"), manifest.dump()).ok());
  };
  auto expect_loss = [&](const std::string& what) {
    const absl::Status status = ReadCheckpoint(dir_, 3).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(what));
  };
  const std::string a = R"({"name": "a", "dtype": "float32", "shape": [2],
                            "offset": 0, "size": 8})";
  // Each of these lies within the data, as the size check alone allowed.
  rewrite(absl::StrCat("[", a, R"(, {"name": "b", "dtype": "float32",
                  "shape": [2], "offset": 4, "size": 8}])"),
          16);
  expect_loss("tensor \"b\" starts at byte 4, not at 8");
  rewrite(absl::StrCat("[", a, R"(, {"name": "a", "dtype": "float32",
                  "shape": [2], "offset": 8, "size": 8}])"),
          16);
  expect_loss("tensor \"a\" appears twice");
  rewrite(absl::StrCat("[", a, "]"), 16);
  expect_loss("its tensors cover 8 of the data's 16 bytes");

  ASSERT_TRUE(WriteCheckpoint(dir_, 3, written).ok());
  EXPECT_TRUE(ReadCheckpoint(dir_, 3).ok());
}

TEST_F(CheckpointTest, MissingIsNotFound) {
  EXPECT_EQ(LatestCheckpointStep(dir_).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadCheckpoint(dir_, 1).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(WriteCheckpoint(dir_, 1, Model(1)).ok());
  fs::remove(File(1, ".data"));
  EXPECT_EQ(ReadCheckpoint(dir_, 1).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CheckpointTest, BadLatestIsDataLoss) {
  ASSERT_TRUE(MakeDirectories(dir_).ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/latest", "twelve\n").ok());
  EXPECT_EQ(LatestCheckpointStep(dir_).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointTest, ADamagedLatestFallsBackToTheNewestManifest) {
  EXPECT_EQ(NewestCheckpointStep(dir_).status().code(),
            absl::StatusCode::kNotFound);
  for (int64_t step : {10, 20}) {
    ASSERT_TRUE(WriteCheckpoint(dir_, step, Model(step), /*keep=*/5).ok());
  }
  EXPECT_EQ(*NewestCheckpointStep(dir_), 20);
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/latest", "x\x7f").ok());
  EXPECT_EQ(LatestCheckpointStep(dir_).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(*NewestCheckpointStep(dir_), 20);
  absl::Status damage;
  EXPECT_EQ(*NewestCheckpointStep(dir_, &damage), 20);
  EXPECT_EQ(damage.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(damage.message()), ::testing::HasSubstr("latest"));
  // With no manifest left, the damage is the answer: no silent fresh start.
  fs::remove(File(10, ".json"));
  fs::remove(File(20, ".json"));
  EXPECT_EQ(NewestCheckpointStep(dir_).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointTest, TemporaryFilesOfCutShortWritesArePruned) {
  ASSERT_TRUE(WriteCheckpoint(dir_, 10, Model(1)).ok());
  for (const char* name :
       {"ckpt-20.data.tmp.999.0", "latest.tmp.999.1", "notes.tmp.1"}) {
    ASSERT_TRUE(WriteFileAtomically(absl::StrCat(dir_, "/", name), "x").ok());
  }
  ASSERT_TRUE(WriteCheckpoint(dir_, 20, Model(2)).ok());
  EXPECT_FALSE(fs::exists(dir_ + "/ckpt-20.data.tmp.999.0"));
  EXPECT_FALSE(fs::exists(dir_ + "/latest.tmp.999.1"));
  EXPECT_TRUE(fs::exists(dir_ + "/notes.tmp.1"));  // not ours
  EXPECT_TRUE(ReadCheckpoint(dir_, 20).ok());
}

TEST_F(CheckpointTest, WrongSizeIsInvalidArgumentNamingTheTensor) {
  std::vector<SavedTensor> tensors = Model(1);
  tensors[0].bytes.pop_back();
  const absl::Status status = WriteCheckpoint(dir_, 1, tensors);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("dense/kernel"), absl::string_view::npos)
      << status;
  EXPECT_FALSE(fs::exists(dir_ + "/latest"));

  tensors = Model(1);
  tensors[1].dtype = "bfloat16";
  EXPECT_EQ(WriteCheckpoint(dir_, 1, tensors).code(),
            absl::StatusCode::kInvalidArgument);
  tensors = Model(1);
  tensors[2].name = tensors[0].name;
  EXPECT_EQ(WriteCheckpoint(dir_, 1, tensors).code(),
            absl::StatusCode::kInvalidArgument);
}

// A name that is not UTF-8 cannot go into the JSON manifest: refused with
// an error, where writing the manifest used to throw.
TEST_F(CheckpointTest, NameThatIsNotUtf8IsInvalidArgument) {
  std::vector<SavedTensor> tensors = Model(1);
  tensors[0].name = "dense/\xff\xfekernel";
  const absl::Status status = WriteCheckpoint(dir_, 1, tensors);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("not valid UTF-8"), absl::string_view::npos)
      << status;
  EXPECT_FALSE(fs::exists(dir_ + "/latest"));
}

}  // namespace
}  // namespace cohort
