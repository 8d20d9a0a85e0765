#include "worker_agent/closure_exchange.h"

#include <algorithm>

#include "worker_agent/attempt_runner.h"

namespace cohort::agent {

absl::StatusOr<v1::ClosureResponse> ExchangeClosures(
    JobControlClient& client, const v1::ClosureRequest& request,
    const absl::Notification& stop, const ExchangeOptions& options) {
  const absl::Time give_up = absl::Now() + options.patience;
  absl::Duration backoff = options.first_backoff;
  while (true) {
    absl::StatusOr<v1::ClosureResponse> response =
        client.RunClosures(request, options.timeout);
    if (response.ok() || !IsPeerFailure(response.status()) ||
        absl::Now() >= give_up) {
      return response;
    }
    if (stop.WaitForNotificationWithTimeout(backoff)) {
      return absl::CancelledError("stopped");
    }
    backoff = std::min(backoff * 2, options.max_backoff);
  }
}

}  // namespace cohort::agent
