#pragma once

// The one way tests wait for something to happen: on a condition, with a
// deadline, never for a fixed time.

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace cohort::testing {

// Polls `condition` every `poll` until it holds or `timeout` passes; returns
// its last value.
inline bool WaitUntil(const std::function<bool()>& condition,
                      absl::Duration timeout,
                      absl::Duration poll = absl::Milliseconds(50)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (condition()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(poll);
  }
}

}  // namespace cohort::testing
