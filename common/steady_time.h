#pragma once

// A clock for liveness and deadlines that a step of the wall clock does not
// move. NTP stepping the clock at boot, or an operator's `date -s`, would
// otherwise make every heartbeat look late at once (a forward step: every
// task declared dead) or none late for as long (a backward one).

#include "absl/time/time.h"

namespace cohort {

// The wall clock as first read in this process, advanced since by the
// monotonic clock: it reads like absl::Now() until the wall clock is
// stepped, and keeps its pace after. For comparing with other instants
// from SteadyNow() of this process; a time sent to another host, or one
// that must match the host's own clock, comes from absl::Now(). Thread-safe.
absl::Time SteadyNow();

}  // namespace cohort
