#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cohort/dataset.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

class RecordIoTest : public testing::Test {
 protected:
  void SetUp() override {
    path_ = absl::StrCat(
        testing::TempDir(), "/records_",
        testing::UnitTest::GetInstance()->current_test_info()->name(), "_",
        getpid());
  }
  void TearDown() override {
    fs::remove(path_);
    for (const std::string& temp : Temps()) fs::remove(temp);
  }

  // The writers' temp files beside path_.
  std::vector<std::string> Temps() const {
    std::vector<std::string> temps;
    const std::string prefix = fs::path(path_).filename().string() + ".tmp";
    for (const auto& entry :
         fs::directory_iterator(fs::path(path_).parent_path())) {
      if (entry.path().filename().string().rfind(prefix, 0) == 0) {
        temps.push_back(entry.path().string());
      }
    }
    return temps;
  }

  void Write(const std::vector<std::string>& records) {
    absl::StatusOr<std::unique_ptr<RecordWriter>> writer =
        RecordWriter::Create(path_);
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (const std::string& r : records) {
      ASSERT_TRUE((*writer)->Write(r).ok());
    }
    ASSERT_TRUE((*writer)->Close().ok());
  }

  std::string Contents() const {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  void Replace(const std::string& contents) const {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << contents;
  }

  // Expects DATA_LOSS whose message holds each of `parts`.
  void ExpectDataLoss(const std::vector<std::string>& parts) const {
    const absl::Status status = ReadRecordFile(path_).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    for (const std::string& part : parts) {
      EXPECT_NE(status.message().find(part), absl::string_view::npos)
          << "no \"" << part << "\" in " << status;
    }
  }

  std::string path_;
};

TEST_F(RecordIoTest, RoundTrip) {
  const std::vector<std::string> records = {"first", "", std::string(3, '\0'),
                                            std::string(100000, 'x')};
  Write(records);
  EXPECT_TRUE(Temps().empty());
  absl::StatusOr<std::vector<std::string>> read = ReadRecordFile(path_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, records);
}

TEST_F(RecordIoTest, EmptyFileHasNoRecords) {
  Write({});
  absl::StatusOr<std::vector<std::string>> read = ReadRecordFile(path_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->empty());
}

TEST_F(RecordIoTest, NothingAppearsBeforeClose) {
  absl::StatusOr<std::unique_ptr<RecordWriter>> writer =
      RecordWriter::Create(path_);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->Write("a").ok());
  EXPECT_FALSE(fs::exists(path_));
  writer->reset();  // abandoned: the temp file goes too
  EXPECT_FALSE(fs::exists(path_));
  EXPECT_TRUE(Temps().empty());
}

// Two writers of one path each write their own temp file: the one dropped
// unclosed takes only its own, and the other still lands whole.
TEST_F(RecordIoTest, TwoWritersOfOnePathKeepApart) {
  absl::StatusOr<std::unique_ptr<RecordWriter>> first =
      RecordWriter::Create(path_);
  absl::StatusOr<std::unique_ptr<RecordWriter>> second =
      RecordWriter::Create(path_);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE((*first)->Write("first's").ok());
  ASSERT_TRUE((*second)->Write("second's").ok());
  first->reset();
  ASSERT_TRUE((*second)->Close().ok());
  absl::StatusOr<std::vector<std::string>> read = ReadRecordFile(path_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, std::vector<std::string>{"second's"});
  EXPECT_TRUE(Temps().empty());
}

TEST_F(RecordIoTest, WriteAfterCloseFails) {
  absl::StatusOr<std::unique_ptr<RecordWriter>> writer =
      RecordWriter::Create(path_);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_EQ((*writer)->Write("late").code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(RecordIoTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadRecordFile(path_).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RecordIoTest, BadMagic) {
  Write({"abc"});
  std::string contents = Contents();
  contents[7] = '2';
  Replace(contents);
  ExpectDataLoss({path_, "record 0 at offset 0", "not a record file"});
}

TEST_F(RecordIoTest, TruncatedHeader) {
  Write({"abc", "defg"});
  // Magic 8 + first record 12 + 3 + 4 = 27; cut the second header.
  Replace(Contents().substr(0, 27 + 5));
  ExpectDataLoss({path_, "record 1 at offset 27", "truncated"});
}

TEST_F(RecordIoTest, TruncatedData) {
  Write({"abc", "defg"});
  const std::string contents = Contents();
  Replace(contents.substr(0, contents.size() - 1));
  ExpectDataLoss({path_, "record 1 at offset 27", "truncated"});
}

TEST_F(RecordIoTest, CorruptData) {
  Write({"abc", "defg"});
  std::string contents = Contents();
  contents[27 + 12 + 2] ^= 0x01;
  Replace(contents);
  ExpectDataLoss({path_, "record 1 at offset 27", "corrupt data"});
}

TEST_F(RecordIoTest, CorruptLength) {
  Write({"abc"});
  std::string contents = Contents();
  contents[8] ^= 0x04;
  Replace(contents);
  ExpectDataLoss({path_, "record 0 at offset 8", "corrupt length"});
}

TEST_F(RecordIoTest, LengthAboveLimit) {
  // A consistent header announcing 2 GiB: length and its CRC-32 both valid.
  Write({});
  std::string header(8, '\0');
  header[3] = static_cast<char>(0x80);  // 2^31, little-endian
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(header.data()), 8));
  std::string contents = Contents() + header;
  for (int i = 0; i < 4; ++i) {
    contents.push_back(static_cast<char>(crc >> (8 * i)));
  }
  Replace(contents);
  ExpectDataLoss({path_, "record 0 at offset 8", "limit"});
}

}  // namespace
}  // namespace cohort
