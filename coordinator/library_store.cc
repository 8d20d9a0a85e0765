#include "coordinator/library_store.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace cohort::coordinator {

std::string LibraryStore::PathOf(const std::string& digest) const {
  return absl::StrCat(dir_, "/", digest, ".so");
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
  if (Contains(digest)) return absl::OkStatus();
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

bool LibraryStore::Contains(const std::string& digest) const {
  return IsSha256Hex(digest) && access(PathOf(digest).c_str(), R_OK) == 0;
}

}  // namespace cohort::coordinator
