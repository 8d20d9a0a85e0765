#pragma once

// A datagram socket posing as systemd's notify socket, for tests of
// Type=notify and the watchdog. Not thread-safe.

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace cohort::testing {

// Binds a fresh socket at `path`. With `export_env`, NOTIFY_SOCKET names
// it in this process's environment for as long as it lives (children that
// get a copy of the environment then report to it).
class FakeNotifySocket {
 public:
  explicit FakeNotifySocket(std::string path, bool export_env = true)
      : export_env_(export_env), path_(std::move(path)) {
    unlink(path_.c_str());
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    path_.copy(address.sun_path, sizeof(address.sun_path) - 1);
    bound_ =
        bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    if (export_env_) setenv("NOTIFY_SOCKET", path_.c_str(), 1);
  }
  ~FakeNotifySocket() {
    if (export_env_) {
      unsetenv("NOTIFY_SOCKET");
      unsetenv("WATCHDOG_USEC");
    }
    close(fd_);
    unlink(path_.c_str());
  }
  // The next message, or "" when none is waiting.
  std::string Poll() {
    char buffer[512];
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    return n > 0 ? std::string(buffer, n) : "";
  }
  // Waits up to `timeout` for a message.
  std::string Next(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      std::string message = Poll();
      if (!message.empty()) return message;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return "";
  }

  // Waits up to `timeout` for a message that starts with `prefix`,
  // skipping others.
  bool Await(const std::string& prefix, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (Next(deadline - absl::Now()).rfind(prefix, 0) == 0) return true;
    }
    return false;
  }

  bool bound() const { return bound_; }
  const std::string& path() const { return path_; }

 private:
  const bool export_env_;
  const std::string path_;
  bool bound_ = false;
  int fd_ = -1;
};

}  // namespace cohort::testing
