#pragma once

// An exclusive advisory lock on a file (flock), held while the FileLock
// lives: one process at a time owns what the file guards, such as a
// coordinator's state dir. The kernel drops it when the process dies, and
// child processes do not inherit it.

#include <string>

#include "absl/status/statusor.h"

namespace cohort {

// Movable, not copyable. Not thread-safe; one owner.
class FileLock {
 public:
  // Locks `path`, creating it, and writes this process's pid into it.
  // FAILED_PRECONDITION naming the holder's pid when another process holds
  // it; other errors name the path and errno.
  static absl::StatusOr<FileLock> Acquire(const std::string& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();  // releases

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace cohort
