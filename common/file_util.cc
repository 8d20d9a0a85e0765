#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

// errno's code (PERMISSION_DENIED for a read-only filesystem,
// RESOURCE_EXHAUSTED for a full disk), so that callers can tell a failure
// that every retry meets from one that may pass.
absl::Status ErrnoError(const std::string& path, absl::string_view what) {
  const int error = errno;
  return absl::Status(
      absl::ErrnoToStatusCode(error),
      absl::StrCat(path, ": ", what, ": ", std::strerror(error)));
}

}  // namespace

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(dir, "cannot open for fsync");
  const int rc = fsync(fd);
  const int error = errno;
  close(fd);
  // EINVAL: the filesystem cannot sync a directory (some FUSE and network
  // ones). Its entries are as durable as it makes them, and the error is
  // not the caller's bad argument, which INVALID_ARGUMENT would claim.
  if (rc != 0 && error != EINVAL) {
    errno = error;
    return ErrnoError(dir, "fsync failed");
  }
  return absl::OkStatus();
}

absl::StatusOr<FileToRead> FileToRead::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(path, "cannot read");
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    const absl::Status error = ErrnoError(path, "cannot read");
    close(fd);
    return error;
  }
  return FileToRead(path, fd,
                    info.st_size > 0 ? static_cast<uint64_t>(info.st_size) : 0);
}

FileToRead::FileToRead(FileToRead&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      size_(other.size_) {}

FileToRead& FileToRead::operator=(FileToRead&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
  }
  return *this;
}

FileToRead::~FileToRead() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::string> FileToRead::ReadAll() {
  // POSIX reads, not a stream: an error midway must not pass for a short
  // file, which a reader would take for a corrupt one.
  std::string contents;
  contents.reserve(size_);
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = read(fd_, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(path_, "read failed");
    }
    contents.append(buffer, static_cast<size_t>(n));
  }
  return contents;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  absl::StatusOr<FileToRead> file = FileToRead::Open(path);
  if (!file.ok()) return file.status();
  return file->ReadAll();
}

absl::StatusOr<TempFile> CreateTempBeside(const std::string& path,
                                          mode_t mode) {
  // Unique per call: threads of one process may write the same path at once.
  static std::atomic<uint64_t> counter{0};
  TempFile temp;
  temp.path = absl::StrCat(path, ".tmp.", getpid(), ".", counter.fetch_add(1));
  temp.fd =
      open(temp.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  // Errors name `path`: the temporary file is ours, not the caller's.
  if (temp.fd < 0) return ErrnoError(path, "cannot write");
  return temp;
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents) {
  absl::StatusOr<TempFile> temp = CreateTempBeside(path);
  if (!temp.ok()) return temp.status();
  const std::string& tmp = temp->path;
  const int fd = temp->fd;
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n =
        write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const absl::Status error = ErrnoError(path, "write failed");
      close(fd);
      unlink(tmp.c_str());
      return error;
    }
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    const absl::Status error = ErrnoError(path, "fsync failed");
    close(fd);
    unlink(tmp.c_str());
    return error;
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const absl::Status error = ErrnoError(path, "rename failed");
    unlink(tmp.c_str());
    return error;
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  return SyncDirectory(dir.empty() ? "." : dir);
}

absl::Status MakeDirectories(const std::string& path) {
  // One level at a time: a new directory's entry survives a power loss
  // only once its parent is synced. The mode is the umask's, which the
  // deployments set (a group may read the task logs).
  std::filesystem::path made;
  for (const std::filesystem::path& part :
       std::filesystem::path(path).lexically_normal()) {
    if (part.empty()) continue;  // after a trailing '/'
    made /= part;
    if (mkdir(made.c_str(), 0777) == 0) {
      const std::string parent = made.parent_path().string();
      absl::Status synced = SyncDirectory(parent.empty() ? "." : parent);
      if (!synced.ok()) return synced;
      continue;
    }
    if (errno != EEXIST) {
      return ErrnoError(
          path, absl::StrCat("cannot create directory ", made.string()));
    }
    struct stat info {};
    if (stat(made.c_str(), &info) != 0) {
      return ErrnoError(
          path, absl::StrCat("cannot create directory ", made.string()));
    }
    if (!S_ISDIR(info.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": cannot create directory: ", made.string(),
                       " exists and is not a directory"));
    }
  }
  return absl::OkStatus();
}

absl::Status MakeWritableDirectory(const std::string& path) {
  if (absl::Status made = MakeDirectories(path); !made.ok()) return made;
  if (access(path.c_str(), W_OK | X_OK) != 0) {
    return ErrnoError(path, "cannot write in directory");
  }
  return absl::OkStatus();
}

std::string ExecutableDirectory() {
  std::error_code error;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return ".";
  return exe.parent_path().string();
}

std::string TempDirectory() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

}  // namespace cohort
