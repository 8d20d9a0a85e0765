#pragma once

// Step libraries kept as files named <sha256>.so in one directory (the
// coordinator's store, each agent's cache), where a file's mtime records
// its last use, so that libraries nothing uses any more can be removed.

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort {

// The path of the library with `digest` in `dir`.
std::string LibraryPath(const std::string& dir, const std::string& digest);

// Records a use of the file at `path` (its mtime becomes now). False when
// there is no such file; another failure is logged.
bool RecordLibraryUse(const std::string& path);

// Removes every library in `dir` whose digest is not in `in_use` and whose
// last use is before `cutoff`; returns what it removed, "<digest> (<size>
// MiB)"; the temp files of writes a crash cut short go alike once they
// are older than `cutoff`. Other files are left alone. `mu`, when given, is
// held across each library's check and removal, so that a use recorded under it
// is never lost to a removal.
std::vector<std::string> RemoveUnusedLibraries(
    const std::string& dir, const absl::flat_hash_set<std::string>& in_use,
    absl::Time cutoff, absl::Mutex* mu = nullptr);

}  // namespace cohort
