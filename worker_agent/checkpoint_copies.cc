#include "worker_agent/checkpoint_copies.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
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
