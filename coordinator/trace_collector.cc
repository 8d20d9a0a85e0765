#include "coordinator/trace_collector.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cohort/v1/agent.grpc.pb.h"
#include "rpc/channel.h"
#include "spdlog/spdlog.h"

namespace cohort::coordinator {

v1::ClockOffset EstimateOffset(int64_t sent_unix_ns, int64_t received_unix_ns,
                               int64_t agent_now_unix_ns) {
  v1::ClockOffset offset;
  const int64_t midpoint =
      sent_unix_ns + (received_unix_ns - sent_unix_ns) / 2;
  offset.set_offset_ns(agent_now_unix_ns - midpoint);
  offset.set_uncertainty_ns((received_unix_ns - sent_unix_ns + 1) / 2);
  return offset;
}

void ShiftToCoordinatorClock(const v1::ClockOffset& offset,
                             v1::TraceData& data) {
  for (v1::ReplicaTrace& replica : *data.mutable_replicas()) {
    for (v1::TraceSpan& span : *replica.mutable_spans()) {
      span.set_start_unix_ns(span.start_unix_ns() - offset.offset_ns());
    }
  }
}

namespace {

// Clock readings per agent; the one with the shortest round trip is kept.
constexpr int kClockReadings = 5;

// The agent's offset from the best of kClockReadings short calls, all by
// `deadline`.
absl::StatusOr<v1::ClockOffset> MeasureOffset(v1::Agent::Stub& stub,
                                              const rpc::Connection& connection,
                                              absl::Time deadline) {
  std::optional<v1::ClockOffset> best;
  v1::GetTraceRequest request;
  request.set_clock_only(true);
  for (int i = 0; i < kClockReadings; ++i) {
    v1::TraceData reading;
    auto context = connection.NewContext(
        std::max(deadline - absl::Now(), absl::Milliseconds(1)));
    const int64_t sent = absl::GetCurrentTimeNanos();
    const grpc::Status status = stub.GetTrace(context.get(), request, &reading);
    const int64_t received = absl::GetCurrentTimeNanos();
    if (!status.ok()) {
      // Out of time: the readings so far serve.
      if (best.has_value()) break;
      return connection.Annotate("Agent.GetTrace", status);
    }
    v1::ClockOffset offset =
        EstimateOffset(sent, received, reading.agent_now_unix_ns());
    if (!best.has_value() ||
        offset.uncertainty_ns() < best->uncertainty_ns()) {
      best = offset;
    }
  }
  return *best;
}

}  // namespace

absl::StatusOr<v1::TraceData> CollectTrace(
    const std::vector<std::pair<std::string, std::string>>& agents,
    const rpc::Security& security, const std::string& job_id,
    const std::string& job_uid, absl::Duration timeout) {
  v1::TraceData merged;
  merged.set_job_id(job_id);
  std::vector<std::string> unreachable;
  std::vector<std::string> missing;  // answered without spans
  bool any_answered = false;
  // One deadline for all: agents out of reach, asked in turn, must not add
  // up past the caller's own.
  const absl::Time deadline = absl::Now() + timeout;
  for (const auto& [task, address] : agents) {
    if (absl::Now() >= deadline) {
      unreachable.push_back(
          absl::StrCat(task, " (not asked: the others took the trace's ",
                       absl::FormatDuration(timeout), ")"));
      continue;
    }
    rpc::Connection connection(address, security);
    auto stub = v1::Agent::NewStub(connection.channel());
    v1::GetTraceRequest request;
    request.set_job_id(job_id);
    request.set_job_uid(job_uid);
    v1::TraceData data;
    auto context = connection.NewContext(deadline - absl::Now());
    const int64_t sent = absl::GetCurrentTimeNanos();
    const grpc::Status status = stub->GetTrace(context.get(), request, &data);
    const int64_t received = absl::GetCurrentTimeNanos();
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      // Untraced, pushed out, or restarted since: the agent's message
      // names itself and the reasons it can tell.
      any_answered = true;
      missing.push_back(status.error_message());
      continue;
    }
    if (!status.ok()) {
      const absl::Status annotated =
          connection.Annotate("Agent.GetTrace", status);
      spdlog::warn("trace of {}: skipping {}: {}", job_id, task,
                   annotated.ToString());
      unreachable.push_back(absl::StrCat(task, " (", annotated.message(), ")"));
      continue;
    }
    any_answered = true;
    absl::StatusOr<v1::ClockOffset> measured =
        MeasureOffset(*stub, connection, deadline);
    // The trace call itself bounds it too, if more loosely.
    v1::ClockOffset offset =
        measured.ok() ? *measured
                      : EstimateOffset(sent, received, data.agent_now_unix_ns());
    offset.set_task(task);
    ShiftToCoordinatorClock(offset, data);
    *merged.add_clocks() = offset;
    for (v1::ReplicaTrace& replica : *data.mutable_replicas()) {
      *merged.add_replicas() = std::move(replica);
    }
  }
  if (!any_answered && !unreachable.empty()) {
    return absl::UnavailableError(
        absl::StrCat("no agent of ", job_id, " could be asked for its trace: ",
                     absl::StrJoin(unreachable, "; ")));
  }
  if (merged.replicas_size() == 0) {
    return absl::NotFoundError(absl::StrCat(
        "no agent holds a trace of ", job_id,
        ": submit it with tracing on (cohortctl submit --trace=STEPS)"));
  }
  // A partial trace is still worth having, said to be partial.
  for (std::string& task : unreachable) merged.add_missing(std::move(task));
  for (std::string& task : missing) merged.add_missing(std::move(task));
  return merged;
}

}  // namespace cohort::coordinator
