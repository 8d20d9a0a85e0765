#pragma once

// Small file helpers with absl::Status errors that name the path.

#include <string>

#include "absl/status/statusor.h"

namespace cohort {

// The whole file. NOT_FOUND when it does not exist; other failures, a read
// error midway included, carry their errno's code (PERMISSION_DENIED,
// RESOURCE_EXHAUSTED, ...).
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes `contents` so that readers see either the old file or the whole new
// one, even across a crash: temp file, fsync, rename, fsync of the directory.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents);

// Creates `path` and its parents (mode 0700 for new ones).
absl::Status MakeDirectories(const std::string& path);

// MakeDirectories, then checks that this process may create files there:
// an error naming the path and why (permissions, a read-only filesystem)
// where it may not.
absl::Status MakeWritableDirectory(const std::string& path);

// $TMPDIR, or /tmp.
std::string TempDirectory();

// The directory holding the running executable (from /proc/self/exe).
std::string ExecutableDirectory();

}  // namespace cohort
