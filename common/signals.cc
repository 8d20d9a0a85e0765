#include "common/signals.h"

#include <signal.h>
#include <time.h>

namespace cohort {
namespace {

sigset_t TerminationSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void BlockTerminationSignals() {
  sigset_t set = TerminationSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A peer closing a socket must not kill the process.
  signal(SIGPIPE, SIG_IGN);
}

bool TerminationPending() {
  sigset_t pending;
  sigemptyset(&pending);
  if (sigpending(&pending) != 0) return false;
  return sigismember(&pending, SIGTERM) == 1 ||
         sigismember(&pending, SIGINT) == 1 ||
         sigismember(&pending, SIGHUP) == 1;
}

int TerminationWaiter::Wait() {
  while (true) {
    if (std::optional<int> sig = WaitFor(absl::Seconds(1))) return *sig;
  }
}

std::optional<int> TerminationWaiter::WaitFor(absl::Duration timeout) {
  const sigset_t set = TerminationSet();
  const absl::Time deadline = absl::Now() + timeout;
  // Short slices so that RequestStop() is noticed promptly.
  const timespec slice = {0, 100 * 1000 * 1000};
  while (!stop_.load()) {
    const int sig = sigtimedwait(&set, nullptr, &slice);
    if (sig > 0) return sig;
    if (absl::Now() >= deadline) return std::nullopt;
  }
  return 0;
}

void TerminationWaiter::RequestStop(std::string reason) {
  {
    absl::MutexLock lock(&mu_);
    if (reason_.empty()) reason_ = std::move(reason);
  }
  stop_.store(true);
}

std::string TerminationWaiter::stop_reason() const {
  absl::MutexLock lock(&mu_);
  return reason_;
}

}  // namespace cohort
