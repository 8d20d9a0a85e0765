#pragma once

// A ParameterServer executor's exchange with the coordinator: its results
// and its request for the next closure, retried while the coordinator is
// away (restarting, or cut off for a while) so that a short outage costs
// the job nothing.

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "cohort/v1/job.pb.h"
#include "worker_agent/job_control_client.h"

namespace cohort::agent {

struct ExchangeOptions {
  absl::Duration timeout = absl::Seconds(10);  // per call
  // How long to keep asking a coordinator that does not answer.
  absl::Duration patience = absl::Seconds(60);
  absl::Duration first_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(2);
};

// Sends `request` until it is answered. Peer failures (the coordinator is
// unreachable or timed out) are retried with doubling backoff for up to
// `options.patience`; any other error is returned at once, as is the last
// one when patience runs out. CANCELLED when `stop` is notified while
// waiting. Thread-safe as `client` is.
absl::StatusOr<v1::ClosureResponse> ExchangeClosures(
    JobControlClient& client, const v1::ClosureRequest& request,
    const absl::Notification& stop, const ExchangeOptions& options = {});

}  // namespace cohort::agent
