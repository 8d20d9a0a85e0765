#include "common/library_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "common/digest.h"
#include "spdlog/spdlog.h"

namespace cohort {

std::string LibraryPath(const std::string& dir, const std::string& digest) {
  return absl::StrCat(dir, "/", digest, ".so");
}

bool RecordLibraryUse(const std::string& path) {
  if (utimensat(AT_FDCWD, path.c_str(), nullptr, 0) == 0) return true;
  if (errno == ENOENT) return false;
  spdlog::warn("cannot record the use of {}: {}", path, std::strerror(errno));
  return access(path.c_str(), R_OK) == 0;
}

std::vector<std::string> RemoveUnusedLibraries(
    const std::string& dir, const absl::flat_hash_set<std::string>& in_use,
    absl::Time cutoff, absl::Mutex* mu) {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return removed;  // nothing stored yet
  for (const fs::directory_iterator end; it != end; it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    // A write cut short by a crash leaves "<digest>.so.tmp.<pid>.<n>"
    // (WriteFileAtomically), which no one will finish: it goes once old.
    const size_t temp_at = name.find(".so.tmp.");
    const bool temp = temp_at != std::string::npos;
    if (!temp && !absl::EndsWith(name, ".so")) continue;
    const std::string digest = name.substr(0, temp ? temp_at : name.size() - 3);
    if (!IsSha256Hex(digest) || (!temp && in_use.contains(digest))) {
      continue;
    }
    struct stat info {};
    auto used_since_cutoff = [&] {
      return stat(it->path().c_str(), &info) != 0 ||
             absl::TimeFromTimespec(info.st_mtim) >= cutoff;
    };
    if (used_since_cutoff()) continue;
    // Checked again under the lock: a use may have come since.
    std::optional<absl::MutexLock> lock;
    if (mu != nullptr) lock.emplace(mu);
    if (mu != nullptr && used_since_cutoff()) continue;
    if (unlink(it->path().c_str()) != 0) {
      spdlog::warn("cannot remove unused step library {}: {}",
                   it->path().string(), std::strerror(errno));
      continue;
    }
    removed.push_back(absl::StrFormat("%s%s (%.1f MiB)", digest,
                                      temp ? ", a partial write" : "",
                                      info.st_size / double(1 << 20)));
  }
  return removed;
}

}  // namespace cohort
