#include "worker_agent/checkpoint_copies.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace cohort::agent {

namespace fs = std::filesystem;

std::string JobKey(const std::string& job_id, const std::string& job_uid) {
  return absl::StrCat(job_id, "-", job_uid);
}

std::string CheckpointCopyDir(const std::string& root,
                              const std::string& job_id,
                              const std::string& job_uid) {
  return absl::StrCat(root, "/", JobKey(job_id, job_uid));
}

namespace {

// Holds the owner's address; not a checkpoint file name (ckpt-*, latest).
constexpr char kOwnerFile[] = "/.owner";

}  // namespace

absl::Status ClaimCheckpointCopy(const std::string& dir,
                                 const std::string& owner) {
  COHORT_RETURN_IF_ERROR(MakeDirectories(dir));
  return WriteFileAtomically(dir + kOwnerFile, owner);
}

std::map<std::string, std::string> ClaimedCheckpointCopies(
    const std::string& root, const std::string& owner) {
  std::map<std::string, std::string> claimed;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_directory(type_ec)) continue;
    const std::string dir = it->path().string();
    absl::StatusOr<std::string> claimed_by = ReadFile(dir + kOwnerFile);
    if (claimed_by.ok() && *claimed_by == owner) {
      claimed.emplace(it->path().filename().string(), dir);
    }
  }
  return claimed;
}

std::optional<uint64_t> RemoveCheckpointCopy(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (ec && ec != std::errc::no_such_file_or_directory) {
      spdlog::warn("cannot remove the checkpoint copies in {}: {}", dir,
                   ec.message());
    }
    return std::nullopt;
  }
  uint64_t bytes = 0;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const uintmax_t size = it->file_size(size_ec);
      if (!size_ec) bytes += size;
    }
  }
  fs::remove_all(dir, ec);
  if (ec) {
    spdlog::warn("cannot remove the checkpoint copies in {}: {}", dir,
                 ec.message());
    return std::nullopt;
  }
  return bytes;
}

}  // namespace cohort::agent
