#include "coordinator/library_store.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "common/file_util.h"
#include "common/library_files.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace cohort::coordinator {

std::string LibraryStore::PathOf(const std::string& digest) const {
  return LibraryPath(dir_, digest);
}

absl::Status LibraryStore::Put(const std::string& digest,
                               const std::string& bytes) {
  if (!IsSha256Hex(digest)) {
    return absl::InvalidArgumentError(
        "library digest must be 64 lowercase hex digits (SHA-256)");
  }
  const std::string actual = Sha256Hex(bytes);
  if (actual != digest) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the uploaded library (", bytes.size(), " bytes) has SHA-256 ", actual,
        ", not the digest given in the spec (", digest, "): corrupted upload"));
  }
  if (Use(digest)) {
    // Checked against the verified bytes: a file damaged on disk (or badly
    // restored) would fail every agent's hash check, and only an upload
    // brings the right bytes back.
    absl::StatusOr<std::string> stored = ReadFile(PathOf(digest));
    if (stored.ok() && *stored == bytes) return absl::OkStatus();
    spdlog::warn("library {}: the stored file {}; writing it again", digest,
                 stored.ok() ? "differs from the bytes of its digest"
                             : std::string(stored.status().message()));
  }
  // Renamed into place with a fresh mtime: the write needs no lock.
  COHORT_RETURN_IF_ERROR(MakeDirectories(dir_));
  return WriteFileAtomically(PathOf(digest), bytes);
}

absl::StatusOr<std::string> LibraryStore::Get(const std::string& digest) const {
  if (!IsSha256Hex(digest) || !Contains(digest)) {
    return absl::NotFoundError(
        absl::StrCat("no step library with digest \"", digest, "\""));
  }
  return ReadFile(PathOf(digest));
}

bool LibraryStore::Use(const std::string& digest) {
  if (!IsSha256Hex(digest)) return false;
  absl::MutexLock lock(&mu_);
  return RecordLibraryUse(PathOf(digest));
}

bool LibraryStore::Contains(const std::string& digest) const {
  return IsSha256Hex(digest) && access(PathOf(digest).c_str(), R_OK) == 0;
}

std::vector<std::string> LibraryStore::RemoveUnused(
    const absl::flat_hash_set<std::string>& in_use, absl::Time now,
    absl::Duration grace) {
  return RemoveUnusedLibraries(dir_, in_use, now - grace, &mu_);
}

}  // namespace cohort::coordinator
