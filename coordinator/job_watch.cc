#include "coordinator/job_watch.h"

#include "absl/time/clock.h"
#include "common/steady_time.h"
#include "proto/job_state.h"
#include "rpc/limits.h"
#include "rpc/status_conversion.h"

namespace cohort::coordinator {

JobWatch::JobWatch(rpc::StreamPump* pump, const JobManager* manager,
                   std::string job_id)
    : PumpedWriter(pump), manager_(manager), job_id_(std::move(job_id)) {}

JobWatch::Step JobWatch::Next() {
  absl::StatusOr<v1::JobStatus> status = manager_->Get(job_id_);
  if (!status.ok()) return {.finish = rpc::ToGrpcStatus(status.status())};
  const absl::Time now = SteadyNow();
  if (last_sent_.has_value() && !JobStatusChanged(*last_sent_, *status) &&
      now - last_sent_time_ < rpc::kStreamKeepalive) {
    return {};
  }
  last_sent_ = *status;
  last_sent_time_ = now;
  Step step{.message = *std::move(status)};
  if (IsTerminal(last_sent_->state())) step.finish = grpc::Status::OK;
  return step;
}

}  // namespace cohort::coordinator
