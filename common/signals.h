#pragma once

// Termination handling for daemons. Call BlockTerminationSignals() first in
// main(), before any thread starts, so that SIGTERM/SIGINT/SIGHUP reach only
// the thread that waits for them; then one thread calls Wait().

#include <atomic>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort {

void BlockTerminationSignals();

// Whether a blocked termination signal waits to be taken: a check that
// costs no wait and consumes nothing, for loops that own no waiter thread.
bool TerminationPending();

// How long a launcher (the coordinator, `cohortctl up`) gives a task between
// SIGTERM and SIGKILL by default. An agent spends up to two thirds of it
// checkpointing the step under way (StopGraceCheckpointShare), the rest
// deregistering and exiting.
inline constexpr absl::Duration kDefaultStopGrace = absl::Seconds(15);
inline absl::Duration StopGraceCheckpointShare(absl::Duration stop_grace) {
  return stop_grace * 2 / 3;
}

// Waits for SIGTERM, SIGINT or SIGHUP, or for RequestStop() from any thread.
// Thread-safe.
class TerminationWaiter {
 public:
  // Returns the signal number, or 0 when RequestStop() ended the wait.
  int Wait();
  // Like Wait(), but gives up after `timeout`, returning nullopt.
  std::optional<int> WaitFor(absl::Duration timeout);
  // Ends Wait() without a signal (e.g. a fatal error on another thread).
  void RequestStop(std::string reason);
  std::string stop_reason() const;

 private:
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  std::string reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort
