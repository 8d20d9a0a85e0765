#pragma once

// Step libraries by content digest, as the coordinator received them: files
// named <sha256>.so under one directory. A digest names exactly one content;
// a stored file is rewritten only when an upload finds it damaged. A library no
// job in the table uses any more is removed once it has gone unused for a grace
// period: each upload or submission naming it counts as a use.

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort::coordinator {

// Thread-safe: files are written under temporary names and renamed; a use
// and a removal of the same library are serialized.
class LibraryStore {
 public:
  explicit LibraryStore(std::string dir) : dir_(std::move(dir)) {}

  // Stores `bytes` (a use), writing them again over a stored file that
  // differs. INVALID_ARGUMENT when they do not hash to `digest`.
  absl::Status Put(const std::string& digest, const std::string& bytes);
  // NOT_FOUND naming the digest when it was never stored.
  absl::StatusOr<std::string> Get(const std::string& digest) const;
  // Whether the library is stored; if so, this is a use of it.
  bool Use(const std::string& digest);

  // Removes every library not in `in_use` whose last use is older than
  // `now - grace`; returns what it removed, "<digest> (<size> MiB)".
  std::vector<std::string> RemoveUnused(
      const absl::flat_hash_set<std::string>& in_use, absl::Time now,
      absl::Duration grace);

 private:
  std::string PathOf(const std::string& digest) const;
  bool Contains(const std::string& digest) const;

  const std::string dir_;
  // Held from a stored library's use to its recording (the file's mtime),
  // and across a removal's last check and unlink.
  absl::Mutex mu_;
};

}  // namespace cohort::coordinator
