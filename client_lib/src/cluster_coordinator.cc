#include "cohort/cluster_coordinator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "proto/job_state.h"

namespace cohort {
namespace {

// Polls back off from the first to the last interval: a short call is seen
// at once, a long wait costs the coordinator ten calls a second.
constexpr absl::Duration kFirstPoll = absl::Milliseconds(2);
constexpr absl::Duration kLastPoll = absl::Milliseconds(100);

// A job that ended is an answer too: nothing it left undone will run.
absl::Status EndedError(const v1::GetCallsResponse& calls,
                        const std::string& job_id, absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "job ", job_id, " ended ", v1::JobState_Name(calls.job_state()),
      calls.job_error().empty() ? ""
                                : absl::StrCat(" (", calls.job_error(), ")"),
      " before ", what));
}

// GetCalls, retried until `deadline` while the coordinator is unreachable
// or slow: it may be restarting, and saved the calls to hand out again.
absl::StatusOr<v1::GetCallsResponse> GetCallsBy(const Client& client,
                                                const std::string& job_id,
                                                const std::vector<int64_t>& ids,
                                                absl::Time deadline) {
  absl::Duration backoff = kLastPoll;
  while (true) {
    absl::StatusOr<v1::GetCallsResponse> calls = client.GetCalls(job_id, ids);
    const bool transient = absl::IsUnavailable(calls.status()) ||
                           absl::IsDeadlineExceeded(calls.status());
    if (!transient || absl::Now() >= deadline) return calls;
    absl::SleepFor(std::min(backoff, deadline - absl::Now()));
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

// The one call a GetCalls for one id answers with; INTERNAL for an answer
// that holds another number (a coordinator of another version).
absl::StatusOr<v1::CallStatus> TheOneCall(
    const absl::StatusOr<v1::GetCallsResponse>& calls) {
  if (!calls.ok()) return calls.status();
  if (calls->calls_size() != 1) {
    return absl::InternalError(absl::StrCat(
        "Jobs.GetCalls returned ", calls->calls_size(), " calls for one id"));
  }
  return calls->calls(0);
}

}  // namespace

absl::StatusOr<v1::CallStatus> RemoteValue::Poll() const {
  return TheOneCall(client_->GetCalls(job_id_, {id_}));
}

absl::StatusOr<std::map<std::string, double>> RemoteValue::Fetch(
    absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration poll = kFirstPoll;
  while (true) {
    absl::StatusOr<v1::GetCallsResponse> calls =
        GetCallsBy(*client_, job_id_, {id_}, deadline);
    absl::StatusOr<v1::CallStatus> one = TheOneCall(calls);
    if (!one.ok()) return one.status();
    const v1::CallStatus& call = *one;
    switch (call.state()) {
      case v1::CallStatus::DONE:
        return std::map<std::string, double>(call.result().values().begin(),
                                             call.result().values().end());
      case v1::CallStatus::FAILED:
        return absl::AbortedError(
            absl::StrCat("call ", id_, " on ", call.result().worker(),
                         " failed: ", call.result().error()));
      case v1::CallStatus::DONE_RESULT_DROPPED:
        return absl::NotFoundError(absl::StrCat(
            "call ", id_,
            " completed, and its result is no longer held by "
            "the coordinator (it keeps the newest 100000, in memory)"));
      default:
        break;
    }
    if (IsTerminal(calls->job_state())) {
      return EndedError(*calls, job_id_, absl::StrCat("call ", id_, " ran"));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("call ", id_, " of job ", job_id_, " is still ",
                       v1::CallStatus::State_Name(call.state()), " after ",
                       absl::FormatDuration(timeout)));
    }
    absl::SleepFor(std::min(poll, deadline - absl::Now()));
    poll = std::min(poll * 2, kLastPoll);
  }
}

absl::StatusOr<RemoteValue> ClusterCoordinator::Schedule(
    const std::string& fn, std::vector<double> args,
    const CallOptions& options) {
  v1::ScheduledCall call;
  call.set_fn(fn);
  call.mutable_args()->Add(args.begin(), args.end());
  call.set_takes_batch(options.takes_batch);
  const absl::Time deadline = absl::Now() + options.timeout;
  absl::Duration poll = kFirstPoll;
  while (true) {
    absl::StatusOr<std::vector<int64_t>> ids =
        client_->Schedule(job_id_, {call});
    if (ids.ok()) return RemoteValue(client_, job_id_, ids->front());
    if (!absl::IsResourceExhausted(ids.status())) return ids.status();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no room for another call within ",
          absl::FormatDuration(options.timeout), ": ", ids.status().message()));
    }
    absl::SleepFor(std::min(poll, deadline - absl::Now()));
    poll = std::min(poll * 2, kLastPoll);
  }
}

absl::Status ClusterCoordinator::Join(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration poll = kFirstPoll;
  while (true) {
    absl::StatusOr<v1::GetCallsResponse> calls =
        GetCallsBy(*client_, job_id_, {}, deadline);
    if (!calls.ok()) return calls.status();
    if (calls->failed() > failures_raised_) {
      // Raised once, as TF's join clears the errors it raised: the first
      // failure, then the newest of those since the last Join.
      const bool first = failures_raised_ == 0;
      const int64_t since = calls->failed() - failures_raised_;
      failures_raised_ = calls->failed();
      return absl::AbortedError(absl::StrCat(
          "call ", first ? calls->first_failed() : calls->last_failed(),
          " failed: ", first ? calls->first_error() : calls->last_error(), " (",
          since, first ? "" : " more", " failed since ",
          first ? "the job began" : "the last Join", "; ", calls->failed(),
          " of ", calls->scheduled(), " in all)"));
    }
    if (calls->completed() == calls->scheduled()) return absl::OkStatus();
    if (IsTerminal(calls->job_state())) {
      return EndedError(
          *calls, job_id_,
          absl::StrCat("its ", calls->scheduled() - calls->completed(),
                       " remaining calls ran"));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          calls->completed(), " of ", calls->scheduled(), " calls of job ",
          job_id_, " completed within ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(std::min(poll, deadline - absl::Now()));
    poll = std::min(poll * 2, kLastPoll);
  }
}

absl::StatusOr<bool> ClusterCoordinator::Done() const {
  absl::StatusOr<v1::GetCallsResponse> calls = client_->GetCalls(job_id_, {});
  if (!calls.ok()) return calls.status();
  return calls->completed() == calls->scheduled();
}

absl::Status ClusterCoordinator::Finish() {
  return client_->FinishJob(job_id_);
}

}  // namespace cohort
