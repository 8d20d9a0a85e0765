#pragma once

// Step libraries by content digest, as the coordinator received them: files
// named <sha256>.so under one directory. A digest names exactly one content,
// so a stored file is never rewritten.

#include <string>

#include "absl/status/statusor.h"

namespace cohort::coordinator {

// Thread-safe: files are written under temporary names and renamed.
class LibraryStore {
 public:
  explicit LibraryStore(std::string dir) : dir_(std::move(dir)) {}

  // INVALID_ARGUMENT when `bytes` does not hash to `digest`.
  absl::Status Put(const std::string& digest, const std::string& bytes);
  // NOT_FOUND naming the digest when it was never stored.
  absl::StatusOr<std::string> Get(const std::string& digest) const;
  bool Contains(const std::string& digest) const;

 private:
  std::string PathOf(const std::string& digest) const;

  const std::string dir_;
};

}  // namespace cohort::coordinator
