#include "ps_server/snapshot.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/digest.h"
#include "common/file_util.h"
#include "spdlog/spdlog.h"

namespace cohort::ps {
namespace {

constexpr absl::string_view kMagic = "COHORTPS";
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kDigestChars = 64;
constexpr size_t kHeaderBytes = 8 + 4 + 8 + kDigestChars;

constexpr absl::string_view kPrefix = "snapshot-";
constexpr absl::string_view kSuffix = ".bin";
constexpr size_t kNumberDigits = 20;

void PutLittleEndian(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i)
    out->push_back(char((value >> (8 * i)) & 0xff));
}

uint64_t GetLittleEndian(absl::string_view data, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= uint64_t(static_cast<unsigned char>(data[i])) << (8 * i);
  }
  return value;
}

// "snapshot-00000000000000000042.bin" and nothing else: temp files and
// renamed corrupt ones do not count.
bool IsSnapshotName(absl::string_view name) {
  if (name.size() != kPrefix.size() + kNumberDigits + kSuffix.size() ||
      !absl::StartsWith(name, kPrefix) || !absl::EndsWith(name, kSuffix)) {
    return false;
  }
  const absl::string_view digits = name.substr(kPrefix.size(), kNumberDigits);
  return std::all_of(digits.begin(), digits.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

absl::Status DataLoss(absl::string_view what) {
  return absl::DataLossError(what);
}

}  // namespace

absl::StatusOr<std::string> EncodeSnapshotFile(const v1::PsSnapshot& snapshot) {
  const size_t payload_bytes = snapshot.ByteSizeLong();
  if (payload_bytes > static_cast<size_t>(INT_MAX)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the shard's snapshot would take ", payload_bytes,
        " bytes, over protobuf's limit of ", INT_MAX, " for one message"));
  }
  std::string payload;
  if (!snapshot.SerializeToString(&payload)) {
    return absl::InternalError("cannot serialize the shard's snapshot");
  }
  std::string file;
  file.reserve(kHeaderBytes + payload.size());
  file.append(kMagic.data(), kMagic.size());
  PutLittleEndian(kFormatVersion, 4, &file);
  PutLittleEndian(payload.size(), 8, &file);
  file.append(Sha256Hex(payload));
  file.append(payload);
  return file;
}

absl::StatusOr<v1::PsSnapshot> DecodeSnapshotFile(absl::string_view contents) {
  if (contents.size() < kHeaderBytes) {
    return DataLoss(absl::StrCat("the file has ", contents.size(),
                                 " bytes, less than the ", kHeaderBytes,
                                 "-byte header"));
  }
  if (contents.substr(0, kMagic.size()) != kMagic) {
    return DataLoss("bad magic: not a Cohort ps snapshot");
  }
  const uint32_t version = GetLittleEndian(contents.substr(8), 4);
  if (version != kFormatVersion) {
    return DataLoss(absl::StrCat("format version ", version,
                                 ", this build reads version ",
                                 kFormatVersion));
  }
  const uint64_t length = GetLittleEndian(contents.substr(12), 8);
  const absl::string_view payload = contents.substr(kHeaderBytes);
  if (length != payload.size()) {
    return DataLoss(absl::StrCat("the header says ", length,
                                 " payload bytes, the file has ",
                                 payload.size()));
  }
  const absl::string_view digest = contents.substr(20, kDigestChars);
  if (Sha256Hex(std::string_view(payload.data(), payload.size())) != digest) {
    return DataLoss("the payload's SHA-256 does not match the header's");
  }
  v1::PsSnapshot snapshot;
  if (payload.size() > static_cast<size_t>(INT_MAX) ||
      !snapshot.ParseFromArray(payload.data(),
                               static_cast<int>(payload.size()))) {
    return DataLoss("the payload does not parse as a PsSnapshot");
  }
  return snapshot;
}

SnapshotDir::SnapshotDir(std::string dir, int keep)
    : dir_(std::move(dir)), keep_(std::max(1, keep)) {}

absl::StatusOr<std::vector<std::string>> SnapshotDir::List() const {
  std::error_code error;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, error)) {
    const std::string name = entry.path().filename().string();
    if (IsSnapshotName(name)) names.push_back(name);
  }
  if (error) {
    return absl::InternalError(
        absl::StrCat(dir_, ": cannot list: ", error.message()));
  }
  // Fixed-width numbers: the names sort as the numbers do.
  std::sort(names.rbegin(), names.rend());
  std::vector<std::string> paths;
  for (const std::string& name : names) paths.push_back(dir_ + "/" + name);
  return paths;
}

absl::StatusOr<std::string> SnapshotDir::Write(const v1::PsSnapshot& snapshot) {
  absl::StatusOr<std::string> contents = EncodeSnapshotFile(snapshot);
  if (!contents.ok()) return contents.status();
  if (absl::Status made = MakeDirectories(dir_); !made.ok()) return made;
  const std::string path =
      absl::StrFormat("%s/%s%0*d%s", dir_, kPrefix, int{kNumberDigits},
                      snapshot.updates(), kSuffix);
  if (absl::Status written = WriteFileAtomically(path, *contents);
      !written.ok()) {
    return written;
  }
  absl::StatusOr<std::vector<std::string>> paths = List();
  if (!paths.ok()) {
    spdlog::warn("cannot prune old snapshots: {}", paths.status().ToString());
    return path;
  }
  for (size_t i = keep_; i < paths->size(); ++i) {
    if (std::remove((*paths)[i].c_str()) != 0) {
      spdlog::warn("cannot delete old snapshot {}: {}", (*paths)[i],
                   std::strerror(errno));
    }
  }
  return path;
}

absl::StatusOr<RestoredSnapshot> SnapshotDir::Restore(
    const std::function<absl::Status(const v1::PsSnapshot&)>& accept) {
  RestoredSnapshot restored;
  std::error_code error;
  if (!std::filesystem::exists(dir_, error)) return restored;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, error)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, kPrefix) && absl::StrContains(name, ".tmp.")) {
      std::filesystem::remove(entry.path(), error);
    }
  }
  absl::StatusOr<std::vector<std::string>> paths = List();
  if (!paths.ok()) return paths.status();
  for (const std::string& path : *paths) {
    // Checked before reading: no snapshot is larger, and a huge or sparse
    // file would exhaust memory on every start instead of being set aside.
    constexpr uintmax_t kMaxFileBytes = kHeaderBytes + uintmax_t{INT_MAX};
    std::error_code size_error;
    const uintmax_t size = std::filesystem::file_size(path, size_error);
    absl::StatusOr<std::string> contents =
        !size_error && size > kMaxFileBytes
            ? absl::StatusOr<std::string>(DataLoss(absl::StrCat(
                  "the file has ", size, " bytes, more than any snapshot (",
                  kMaxFileBytes, ")")))
            : ReadFile(path);
    absl::StatusOr<v1::PsSnapshot> snapshot =
        contents.ok() ? DecodeSnapshotFile(*contents)
                      : absl::StatusOr<v1::PsSnapshot>(contents.status());
    const absl::Status status =
        snapshot.ok() ? accept(*snapshot) : snapshot.status();
    if (status.ok()) {
      restored.snapshot = *std::move(snapshot);
      restored.path = path;
      return restored;
    }
    // Only a file whose bytes are wrong is set aside. One that could not be
    // read (no descriptors, no permission) may be the newest good state:
    // the restore fails, and the process's restart tries it again.
    if (status.code() != absl::StatusCode::kDataLoss) {
      return absl::Status(
          status.code(),
          absl::StrCat("cannot restore from ", path, ": ", status.message()));
    }
    const std::string reason(status.message());
    spdlog::warn("snapshot {} is unusable ({}); trying an older one", path,
                 reason);
    restored.skipped.push_back({path, reason});
    std::filesystem::rename(path, path + ".corrupt", error);
    if (error) {
      spdlog::warn("cannot rename {} aside: {}", path, error.message());
    }
  }
  return restored;
}

}  // namespace cohort::ps
