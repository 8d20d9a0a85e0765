#include "common/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace cohort {

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    close(fd);
    if (error != EWOULDBLOCK) {
      return absl::ErrnoToStatus(error, absl::StrCat("cannot lock ", path));
    }
    const std::string holder(
        absl::StripAsciiWhitespace(ReadFile(path).value_or("")));
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is locked by another process",
        holder.empty() ? "" : absl::StrCat(" (pid ", holder, ")")));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) !=
                                   static_cast<ssize_t>(pid.size())) {
    const int error = errno;
    close(fd);
    return absl::ErrnoToStatus(error, absl::StrCat("cannot write ", path));
  }
  return FileLock(fd);
}

FileLock::FileLock(FileLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace cohort
