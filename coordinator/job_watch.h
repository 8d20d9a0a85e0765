#pragma once

// Jobs.WatchJob: a job's status pushed to the watcher as it changes, read
// from the JobManager by the stream pump.

#include <string>

#include "absl/time/time.h"
#include "cohort/v1/job.pb.h"
#include "coordinator/job_manager.h"
#include "rpc/stream_pump.h"

namespace cohort::coordinator {

// One call. Sends the status now, then whenever JobStatusChanged says so
// (or rpc::kStreamKeepalive passed), and ends with OK after the terminal status;
// NOT_FOUND when the job is unknown. `manager` is not owned. Deletes itself
// when the call is done.
class JobWatch final : public rpc::PumpedWriter<v1::JobStatus> {
 public:
  JobWatch(rpc::StreamPump* pump, const JobManager* manager,
           std::string job_id);

 private:
  Step Next() override;

  const JobManager* const manager_;
  const std::string job_id_;
  // Pump thread only.
  std::optional<v1::JobStatus> last_sent_;
  absl::Time last_sent_time_ = absl::InfinitePast();
};

}  // namespace cohort::coordinator
