#pragma once

// Admin.StreamLogs: the coordinator relays log lines from the daemons that
// hold them (each task's Logs.ReadLog, and its own LogBuffer) to a user, so
// that logs are read from any host, through the one address users know.
//
// A task's stream ends when the task's does (without follow, once caught
// up); a job's, once the job has ended and its tasks' last lines are in. A
// stream whose reader leaves is cancelled upstream too.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "cohort/v1/coordinator.pb.h"
#include "cohort/v1/logs.pb.h"
#include "common/log_buffer.h"
#include "coordinator/cluster_manager.h"
#include "coordinator/job_manager.h"
#include "rpc/security.h"
#include "rpc/stream_pump.h"

namespace cohort::coordinator {

// Where one stream's lines come from. Not thread-safe: the relay's pump
// thread alone calls it (a remote source guards what gRPC hands it).
class LogSource {
 public:
  virtual ~LogSource() = default;
  // Appends the lines received since the last call; adds to *dropped the
  // lines the source lost.
  virtual void Take(std::vector<v1::LogLine>* out, int64_t* dropped) = 0;
  // Set once no more lines will come: OK, or why the source failed.
  virtual std::optional<grpc::Status> Ended() = 0;
  // "worker:0", or "coordinator".
  virtual const std::string& task() const = 0;
};

// What the relay for one request reads, and when it ends.
struct LogRelayPlan {
  std::vector<std::unique_ptr<LogSource>> sources;
  bool follow = false;
  // A job's stream: whether the job has ended (then the stream ends soon
  // after). Null for a task's.
  std::function<bool()> job_ended;
};

// Resolves `request.target` ("coordinator", a task, a job id) into sources
// reading `own_log` or the tasks' Logs services. NOT_FOUND names an unknown
// target, FAILED_PRECONDITION a task with no address known yet.
absl::StatusOr<LogRelayPlan> PlanLogRelay(
    const v1::StreamLogsRequest& request, const ClusterManager& cluster,
    const JobManager& jobs, const LogBuffer* own_log,
    const rpc::Security& security);

// The streaming call for one request; deletes itself when done.
class LogRelay final : public rpc::PumpedWriter<v1::LogChunk> {
 public:
  LogRelay(rpc::StreamPump* pump, LogRelayPlan plan);

 private:
  Step Next() override;

  LogRelayPlan plan_;
  // Pump thread only.
  std::vector<v1::LogLine> pending_;
  int64_t dropped_ = 0;
  std::vector<bool> reported_;  // per source: its failure was told
  std::optional<absl::Time> job_ended_at_;
  absl::Time last_sent_ = absl::Now();
  std::optional<grpc::Status> final_;
};

}  // namespace cohort::coordinator
