#pragma once

// Work one rank of a group does while the others wait for it in a
// collective: a checkpoint read from or written to a slow disk. Left
// inline, the others' collective would fail once the work outlasted the
// collective timeout; here every rank instead all-reduces, once per
// interval, whether any rank's work is still going, so that no collective
// waits longer than an interval plus the network, however long the work.

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace cohort::agent {

struct KeepAliveOptions {
  // How long a rank's collective may wait for another's: under the
  // collective timeout.
  absl::Duration interval = absl::Seconds(1);
  // How long the other ranks wait for the work at most.
  absl::Duration limit = absl::Hours(1);
  // How often a rank whose work is still going says so in the log.
  absl::Duration report_every = absl::Seconds(30);
  std::string what;  // "writing checkpoint 1200", for errors and the log
  int rank = 0;      // this rank in the group, for errors
};

// Every rank of the group calls it at the same point, with `work` (may be
// empty) on the ranks that have some. `all_reduce_max` all-reduces one
// int64 with MAX over the group. Runs `work` on a thread of its own, and
// returns only once it has ended, whatever the group does: like the inline
// I/O it replaces, nothing interrupts it, and a stopping agent's bound on
// stuck work (JobAgentOptions::stop_timeout) covers it. Returns, in this
// order: the all-reduce's error (the group's); on every rank,
// DEADLINE_EXCEEDED naming `what` and the rank once some rank's work has
// run past `limit`; this rank's work's status. Thread-compatible.
absl::Status KeepGroupAliveDuring(
    std::function<absl::Status()> work,
    const std::function<absl::Status(int64_t*)>& all_reduce_max,
    const KeepAliveOptions& options);

}  // namespace cohort::agent
