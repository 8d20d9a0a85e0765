#pragma once

// Jobs.GetTrace: reads a traced job's spans from its agents (Agent.GetTrace)
// and puts them on the coordinator's clock. Each agent's offset is measured
// as NTP does: the agent stamps its clock as it answers a short call, and
// the coordinator takes the midpoint of the round trip as the moment it
// did; half the round trip bounds the error, and of a few readings the one
// with the shortest round trip is kept.

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cohort/v1/trace.pb.h"
#include "rpc/security.h"

namespace cohort::coordinator {

// Agent time - coordinator time, and its bound, from one round trip that
// left at `sent`, came back at `received`, and was stamped `agent_now`.
v1::ClockOffset EstimateOffset(int64_t sent_unix_ns, int64_t received_unix_ns,
                               int64_t agent_now_unix_ns);

// Moves every span of `data` from the agent's clock to the coordinator's.
void ShiftToCoordinatorClock(const v1::ClockOffset& offset,
                             v1::TraceData& data);

// Asks each agent (task name, address) in turn, all within `timeout`, for
// the spans of the job with this id and uid (JobStatus.uid). Agents that
// hold no trace of the job, or are out of reach, are skipped and named in
// TraceData.missing; NOT_FOUND when no agent holds one, UNAVAILABLE naming
// them when none answered. Blocks: run it off gRPC threads.
absl::StatusOr<v1::TraceData> CollectTrace(
    const std::vector<std::pair<std::string, std::string>>& agents,
    const rpc::Security& security, const std::string& job_id,
    const std::string& job_uid, absl::Duration timeout);

}  // namespace cohort::coordinator
