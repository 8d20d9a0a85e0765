#include "worker_agent/checkpoint_copies.h"

#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace cohort::agent {

namespace fs = std::filesystem;

std::string JobKey(const std::string& job_id, const std::string& job_uid) {
  return absl::StrCat(job_id, "-", job_uid);
}

namespace {

// Holds the cluster's uid; not a checkpoint file name (ckpt-*, latest).
constexpr char kOwnerName[] = ".owner";

std::string OwnerFile(const std::string& dir) {
  return absl::StrCat(dir, "/", kOwnerName);
}

}  // namespace

std::string CheckpointCopyDirFor(const std::string& root,
                                 const v1::AgentJobAssignment& assignment) {
  if (root.empty() || assignment.node() == 0) return "";
  return absl::StrCat(root, "/",
                      JobKey(assignment.job_id(), assignment.job_uid()));
}

absl::Status ClaimCheckpointCopy(const std::string& dir,
                                 const std::string& cluster_uid) {
  COHORT_RETURN_IF_ERROR(MakeDirectories(dir));
  return WriteFileAtomically(OwnerFile(dir), cluster_uid);
}

std::map<std::string, std::string> ClaimedCheckpointCopies(
    const std::string& root, const std::string& cluster_uid) {
  std::map<std::string, std::string> claimed;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_directory(type_ec)) continue;
    const std::string dir = it->path().string();
    absl::StatusOr<std::string> claimed_by = ReadFile(OwnerFile(dir));
    if (claimed_by.ok() && *claimed_by == cluster_uid) {
      claimed.emplace(it->path().filename().string(), dir);
    }
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    spdlog::warn("cannot list the checkpoint copies in {}: {}", root,
                 ec.message());
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
  // The claim goes last: a copy that stays half removed is still claimed.
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().filename() != kOwnerName) entries.push_back(it->path());
  }
  for (const fs::path& entry : entries) {
    if (ec) break;
    fs::remove_all(entry, ec);
  }
  if (!ec) fs::remove_all(dir, ec);
  if (ec) {
    spdlog::warn("cannot remove the checkpoint copies in {}: {}", dir,
                 ec.message());
    return std::nullopt;
  }
  return bytes;
}

}  // namespace cohort::agent
