#pragma once

// Small file helpers with absl::Status errors that name the path.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace cohort {

// The whole file. NOT_FOUND when it does not exist; other failures, a read
// error midway included, carry their errno's code (PERMISSION_DENIED,
// RESOURCE_EXHAUSTED, ...).
absl::StatusOr<std::string> ReadFile(const std::string& path);

// A file opened to be read whole. An open file stays readable after it is
// unlinked or replaced, so files opened together are read as one set even
// while a writer prunes them. Owns the descriptor; movable; not
// thread-safe.
class FileToRead {
 public:
  // NOT_FOUND when it does not exist; other failures carry errno's code.
  static absl::StatusOr<FileToRead> Open(const std::string& path);
  FileToRead(FileToRead&& other) noexcept;
  FileToRead& operator=(FileToRead&& other) noexcept;
  FileToRead(const FileToRead&) = delete;
  FileToRead& operator=(const FileToRead&) = delete;
  ~FileToRead();

  const std::string& path() const { return path_; }
  // Its size when it was opened: checked before reading, so that a file
  // far larger than expected is never read into memory.
  uint64_t size() const { return size_; }
  // Everything in it; once, from the start (it may be a pipe).
  absl::StatusOr<std::string> ReadAll();

 private:
  FileToRead(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}

  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// A new file beside `path`, to be renamed onto it once written: its name is
// unique per process and call, and it is created exclusively, so that two
// writers of one path never share it. `fd` is open for writing; the caller
// closes it and renames or unlinks `path`.
struct TempFile {
  std::string path;
  int fd = -1;
};
absl::StatusOr<TempFile> CreateTempBeside(const std::string& path,
                                          mode_t mode = 0600);

// Writes `contents` so that readers see either the old file or the whole new
// one, even across a crash: temp file, fsync, rename, fsync of the directory.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents);

// fsync of a directory, so that the entries made in it survive a power loss.
// A filesystem that cannot sync directories (EINVAL) is not an error.
absl::Status SyncDirectory(const std::string& dir);

// Creates `path` and its parents (their mode is the umask's), syncing the
// parent of each new one.
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
