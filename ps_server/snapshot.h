#pragma once

// A ps shard's snapshots on disk, so that a restarted ps task resumes with
// its variables instead of the job starting over.
//
// A directory holds snapshot-<updates, 20 digits>.bin files (the newest 3
// are kept). Each file is a header followed by the payload:
//
//   offset  size  field
//        0     8  magic "COHORTPS"
//        8     4  format version, little-endian (1)
//       12     8  payload length in bytes, little-endian
//       20    64  SHA-256 of the payload, lowercase hex
//       84     -  payload: a serialized cohort.v1.PsSnapshot
//
// so that a torn or bit-flipped file is recognised and an older one used.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cohort/v1/ps.pb.h"

namespace cohort::ps {

// The file's bytes for `snapshot`. RESOURCE_EXHAUSTED when the payload
// exceeds protobuf's 2 GiB message limit.
absl::StatusOr<std::string> EncodeSnapshotFile(const v1::PsSnapshot& snapshot);

// The snapshot a file holds. DATA_LOSS saying what is wrong: the magic, the
// version, the length, the checksum, or the payload's parse.
absl::StatusOr<v1::PsSnapshot> DecodeSnapshotFile(absl::string_view contents);

// A snapshot file Restore could not use, and why.
struct SkippedSnapshot {
  std::string path;
  std::string reason;
};

struct RestoredSnapshot {
  std::optional<v1::PsSnapshot> snapshot;  // unset: none usable, start fresh
  std::string path;                        // the file it came from
  std::vector<SkippedSnapshot> skipped;    // newer files that were unusable
};

// The snapshot files of one shard in one directory. Not thread-safe: one
// thread restores at start, then one thread writes.
class SnapshotDir {
 public:
  explicit SnapshotDir(std::string dir, int keep = 3);

  const std::string& dir() const { return dir_; }

  // Writes `snapshot` atomically (temp file, fsync, rename, directory
  // fsync) as snapshot-<its updates>.bin, replacing a file of that name,
  // then deletes all but the newest `keep`. Returns the path. Creates the
  // directory when missing.
  absl::StatusOr<std::string> Write(const v1::PsSnapshot& snapshot);

  // Tries the files newest first. One that cannot be read or decoded, or
  // that `accept` refuses with DATA_LOSS, is skipped: a warning naming the
  // file and the reason is logged, the file is renamed to <name>.corrupt
  // (so that newer snapshots are numbered past it) and the next older one
  // is tried. Any other error of `accept` ends the restore with that error.
  // Leftover temp files of an interrupted write are removed.
  absl::StatusOr<RestoredSnapshot> Restore(
      const std::function<absl::Status(const v1::PsSnapshot&)>& accept);

  // Paths of the snapshot files, newest first.
  absl::StatusOr<std::vector<std::string>> List() const;

 private:
  const std::string dir_;
  const int keep_;
};

}  // namespace cohort::ps
