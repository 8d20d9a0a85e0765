// Record files (cohort/dataset.h). Layout, all integers little-endian:
//
//   "COHREC01"                                   8-byte magic
//   per record:
//     uint64 length
//     uint32 CRC-32 of the 8 length bytes        so a torn length is caught
//     length bytes of data                       before it is trusted
//     uint32 CRC-32 of the data

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cohort/dataset.h"
#include "common/crc32.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

constexpr std::string_view kMagic = "COHREC01";
// Larger lengths are taken for corruption rather than allocated.
constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 30;
// Buffered bytes that trigger a write(2).
constexpr size_t kFlushBytes = size_t{1} << 20;

void AppendLittleEndian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    out.push_back(static_cast<char>(value >> (8 * i)));
  }
}

uint64_t LoadLittleEndian(std::string_view in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  }
  return value;
}

absl::Status ErrnoError(const std::string& path, absl::string_view what) {
  const int error = errno;
  return absl::Status(
      absl::ErrnoToStatusCode(error),
      absl::StrCat(path, ": ", what, ": ", std::strerror(error)));
}

// Writes a temp file beside the target and renames it into place on Close(),
// so that readers never see a partial file.
class RecordFileWriter final : public RecordWriter {
 public:
  RecordFileWriter(std::string path, TempFile temp)
      : path_(std::move(path)), tmp_(std::move(temp.path)), fd_(temp.fd) {
    buffer_ = kMagic;
  }

  ~RecordFileWriter() override {
    if (fd_ >= 0) {
      close(fd_);
      unlink(tmp_.c_str());
    }
  }

  absl::Status Write(std::string_view record) override {
    if (fd_ < 0) return Closed();
    if (record.size() > kMaxRecordBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": record ", records_, " holds ", record.size(),
                       " bytes; the limit is ", kMaxRecordBytes));
    }
    const size_t start = buffer_.size();
    AppendLittleEndian(buffer_, record.size(), 8);
    AppendLittleEndian(buffer_,
                       Crc32(std::string_view(buffer_).substr(start, 8)), 4);
    buffer_.append(record);
    AppendLittleEndian(buffer_, Crc32(record), 4);
    ++records_;
    if (buffer_.size() >= kFlushBytes) return Flush();
    return absl::OkStatus();
  }

  absl::Status Close() override {
    if (fd_ < 0) return Closed();
    absl::Status status = Flush();
    if (status.ok() && fsync(fd_) != 0) {
      status = ErrnoError(tmp_, "fsync failed");
    }
    if (close(fd_) != 0 && status.ok()) {
      status = ErrnoError(tmp_, "close failed");
    }
    fd_ = -1;
    if (status.ok() && rename(tmp_.c_str(), path_.c_str()) != 0) {
      status = ErrnoError(path_, "rename failed");
    }
    if (!status.ok()) {
      unlink(tmp_.c_str());
      return status;
    }
    // Makes the rename durable.
    std::string dir = std::filesystem::path(path_).parent_path().string();
    return SyncDirectory(dir.empty() ? "." : dir);
  }

 private:
  absl::Status Closed() const {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": record writer already closed"));
  }

  absl::Status Flush() {
    std::string_view pending = buffer_;
    while (!pending.empty()) {
      const ssize_t n = write(fd_, pending.data(), pending.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError(tmp_, "write failed");
      pending.remove_prefix(static_cast<size_t>(n));
    }
    buffer_.clear();
    return absl::OkStatus();
  }

  const std::string path_;
  const std::string tmp_;
  int fd_;
  std::string buffer_;
  int64_t records_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Create(
    const std::string& path) {
  absl::StatusOr<TempFile> temp = CreateTempBeside(path, 0644);
  if (!temp.ok()) {
    return absl::Status(
        temp.status().code(),
        absl::StrCat("cannot create record file: ", temp.status().message()));
  }
  return std::make_unique<RecordFileWriter>(path, *std::move(temp));
}

absl::StatusOr<std::vector<std::string>> ReadRecordFile(
    const std::string& path) {
  COHORT_ASSIGN_OR_RETURN(const std::string contents, ReadFile(path));
  const std::string_view file = contents;
  int64_t record = 0;
  size_t offset = 0;
  const auto data_loss = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(path, ": record ", record,
                                            " at offset ", offset, ": ", what));
  };
  if (file.substr(0, kMagic.size()) != kMagic) {
    return data_loss(
        absl::StrCat("not a record file (it does not begin with \"",
                     std::string(kMagic), "\")"));
  }
  offset = kMagic.size();
  std::vector<std::string> records;
  while (offset < file.size()) {
    const std::string_view rest = file.substr(offset);
    if (rest.size() < 12) {
      return data_loss(absl::StrCat("truncated: ", rest.size(),
                                    " bytes where a 12-byte header belongs"));
    }
    const uint64_t length = LoadLittleEndian(rest, 8);
    if (Crc32(rest.substr(0, 8)) != LoadLittleEndian(rest.substr(8), 4)) {
      return data_loss("corrupt length (CRC-32 mismatch)");
    }
    if (length > kMaxRecordBytes) {
      return data_loss(absl::StrCat("length ", length, " is above the ",
                                    kMaxRecordBytes, "-byte limit"));
    }
    if (rest.size() - 12 < length + 4) {
      return data_loss(absl::StrCat("truncated: ", length,
                                    " data bytes and a CRC-32 announced, ",
                                    rest.size() - 12, " bytes left"));
    }
    const std::string_view data = rest.substr(12, length);
    if (Crc32(data) != LoadLittleEndian(rest.substr(12 + length), 4)) {
      return data_loss("corrupt data (CRC-32 mismatch)");
    }
    records.emplace_back(data);
    offset += 12 + length + 4;
    ++record;
  }
  return records;
}

}  // namespace cohort
