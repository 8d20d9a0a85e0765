#include "coordinator/closure_scheduler.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rpc/limits.h"

namespace cohort::coordinator {
namespace {

constexpr size_t kRecentResults = 20;
constexpr absl::Duration kRatePeriod = absl::Seconds(1);

}  // namespace

ClosureScheduler::ClosureScheduler(int64_t steps, const v1::JobStatus& status)
    : client_scheduled_(status.spec().ps().schedule_from_client()),
      steps_(client_scheduled_ ? status.calls_scheduled() : steps) {
  for (const v1::ScheduledCall& call : status.pending_calls()) {
    if (call.id() >= 0 && call.id() < steps_) calls_[call.id()] = call;
  }
  batches_ = status.batches_scheduled();
  released_ = steps_;  // what a saved status holds was saved
  batches_released_ = batches_;
  if (status.calls_failed() > 0) {
    failed_ = status.calls_failed();
    first_failed_ = status.first_failed_call();
    first_error_ = status.first_call_error();
    last_failed_ = status.last_failed_call();
    last_error_ = status.last_call_error();
  }
  scheduling_finished_ = status.scheduling_finished();
  prefix_ = std::min(status.completed_prefix(), steps_);
  for (int64_t id : status.completed_beyond()) {
    if (id >= prefix_ && id < steps_) completed_beyond_.insert(id);
  }
  completed_count_ = prefix_ + static_cast<int64_t>(completed_beyond_.size());
  next_ = prefix_;
  recent_.assign(status.recent_results().begin(),
                 status.recent_results().end());
  for (const auto& [name, value] : status.metrics()) {
    metrics_[name] = {-1, value};
  }
  for (const v1::ClosureResult& result : recent_) NoteValues(result);
  rerun_ = status.closures_rerun();
  stop_reason_ = status.stop_reason();
}

void ClosureScheduler::Complete(const v1::ClosureResult& result) {
  const int64_t id = result.closure();
  if (id < 0 || id >= steps_) return;
  if (id < prefix_ || completed_beyond_.count(id) > 0) return;  // a re-run
  completed_beyond_.insert(id);
  ++completed_count_;
  while (!completed_beyond_.empty() && *completed_beyond_.begin() == prefix_) {
    completed_beyond_.erase(completed_beyond_.begin());
    ++prefix_;
  }
  recent_.push_back(result);
  if (recent_.size() > kRecentResults) recent_.pop_front();
  if (client_scheduled_) {
    calls_.erase(id);
    results_[id] = result;
    if (results_.size() > kKeptResults) results_.erase(results_.begin());
    if (!result.error().empty()) {
      if (failed_++ == 0) {
        first_failed_ = id;
        first_error_ = result.error();
      }
      last_failed_ = id;
      last_error_ = result.error();
    }
  }
  NoteValues(result);
  if (stop_reason_.empty() && !result.stop_reason().empty()) {
    stop_reason_ = result.stop_reason();
  }
}

void ClosureScheduler::NoteValues(const v1::ClosureResult& result) {
  for (const auto& [name, value] : result.values()) {
    auto [it, inserted] = metrics_.try_emplace(name, Reported{-1, value});
    if (inserted || result.closure() >= it->second.closure) {
      it->second = {result.closure(), value};
    }
  }
}

v1::ClosureResponse ClosureScheduler::Exchange(
    const std::string& slot, const std::vector<v1::ClosureResult>& completed,
    int want) {
  for (const v1::ClosureResult& result : completed) {
    auto it = inflight_.find(result.closure());
    if (it != inflight_.end() && it->second == slot) inflight_.erase(it);
    Complete(result);
  }
  for (auto it = inflight_.begin(); it != inflight_.end();) {
    if (it->second == slot) {
      requeued_.push_back(it->first);
      ++rerun_;
      it = inflight_.erase(it);
    } else {
      ++it;
    }
  }
  v1::ClosureResponse response;
  // After stop_training nothing new starts; a lost closure is not re-run.
  if (!stop_reason_.empty()) want = 0;
  for (int i = 0; i < want; ++i) {
    int64_t id = -1;
    while (!requeued_.empty() && id < 0) {
      const int64_t candidate = requeued_.front();
      requeued_.pop_front();
      const bool finished =
          candidate < prefix_ || completed_beyond_.count(candidate) > 0;
      if (!finished) id = candidate;
    }
    // Skip ids a restored table already has.
    while (id < 0 && next_ < released_) {
      const int64_t candidate = next_++;
      if (completed_beyond_.count(candidate) == 0 && candidate >= prefix_) {
        id = candidate;
      }
    }
    if (id < 0) break;
    inflight_[id] = slot;
    response.add_closures(id);
    if (client_scheduled_) *response.add_calls() = calls_[id];
  }
  if (done()) {
    response.set_done(true);
  } else if (response.closures().empty() && want > 0) {
    response.set_retry_after_ms(50);
  }
  return response;
}

int ClosureScheduler::RequeueAll() { return Requeue(""); }

int ClosureScheduler::Requeue(const std::string& task) {
  const std::string prefix = task.empty() ? "" : absl::StrCat(task, "/");
  int count = 0;
  for (auto it = inflight_.begin(); it != inflight_.end();) {
    if (absl::StartsWith(it->second, prefix)) {
      requeued_.push_back(it->first);
      it = inflight_.erase(it);
      ++count;
    } else {
      ++it;
    }
  }
  rerun_ += count;
  return count;
}

double ClosureScheduler::rate(absl::Time now) {
  if (rate_time_ == absl::InfinitePast()) {
    rate_time_ = now;
    rate_count_ = completed_count_;
  } else if (now - rate_time_ >= kRatePeriod) {
    rate_ = static_cast<double>(completed_count_ - rate_count_) /
            absl::ToDoubleSeconds(now - rate_time_);
    rate_time_ = now;
    rate_count_ = completed_count_;
  }
  return rate_;
}

absl::StatusOr<std::vector<int64_t>> ClosureScheduler::Schedule(
    std::vector<v1::ScheduledCall> calls) {
  if (!client_scheduled_) {
    return absl::FailedPreconditionError(
        "the job runs its own steps; only a job with "
        "ps.schedule_from_client takes scheduled calls");
  }
  if (scheduling_finished_) {
    return absl::FailedPreconditionError(
        "the client finished scheduling this job (FinishJob)");
  }
  if (!stop_reason_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the job stopped training: ", stop_reason_));
  }
  if (released_ < steps_) {
    return absl::FailedPreconditionError(
        "calls scheduled before are still being saved");
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i].fn().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("call ", i, " names no function"));
    }
    if (calls[i].fn().size() > rpc::kMaxSpecTextBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "call ", i, " names a function of ", calls[i].fn().size(),
          " bytes; at most ", rpc::kMaxSpecTextBytes));
    }
    if (static_cast<size_t>(calls[i].args_size()) > kMaxArgs) {
      return absl::InvalidArgumentError(
          absl::StrCat("call ", i, " (", calls[i].fn(), ") has ",
                       calls[i].args_size(), " args; at most ", kMaxArgs));
    }
  }
  const int64_t pending = static_cast<int64_t>(calls_.size());
  if (pending + static_cast<int64_t>(calls.size()) > kMaxPendingCalls) {
    return absl::ResourceExhaustedError(absl::StrCat(
        pending, " calls are not completed yet, and the job holds at most ",
        kMaxPendingCalls, ": retry once some complete"));
  }
  int64_t args = 0;
  for (const auto& [id, call] : calls_) args += call.args_size();
  for (const v1::ScheduledCall& call : calls) args += call.args_size();
  if (args > kMaxPendingArgs) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the calls not completed yet would hold ", args,
                     " args, and the job holds at most ", kMaxPendingArgs,
                     ": retry once some complete"));
  }
  std::vector<int64_t> ids;
  for (v1::ScheduledCall& call : calls) {
    call.set_id(steps_++);
    call.set_batch(call.takes_batch() ? batches_++ : -1);
    ids.push_back(call.id());
    calls_[call.id()] = std::move(call);
  }
  return ids;
}

void ClosureScheduler::Retract() {
  calls_.erase(calls_.lower_bound(released_), calls_.end());
  steps_ = released_;
  batches_ = batches_released_;
}

absl::StatusOr<v1::CallStatus> ClosureScheduler::Call(int64_t id) const {
  if (id < 0 || id >= steps_) {
    return absl::InvalidArgumentError(
        absl::StrCat("call ", id, " was never scheduled: the job has calls 0..",
                     steps_ - 1));
  }
  v1::CallStatus call;
  call.set_id(id);
  if (auto it = results_.find(id); it != results_.end()) {
    call.set_state(it->second.error().empty() ? v1::CallStatus::DONE
                                              : v1::CallStatus::FAILED);
    *call.mutable_result() = it->second;
  } else if (id < prefix_ || completed_beyond_.count(id) > 0) {
    call.set_state(v1::CallStatus::DONE_RESULT_DROPPED);
  } else if (inflight_.count(id) > 0) {
    call.set_state(v1::CallStatus::RUNNING);
  } else {
    call.set_state(v1::CallStatus::QUEUED);
  }
  return call;
}

void ClosureScheduler::FillCounts(v1::GetCallsResponse& response) const {
  response.set_scheduled(steps_);
  response.set_completed(completed_count_);
  response.set_failed(failed_);
  response.set_first_failed(first_failed_);
  response.set_first_error(first_error_);
  response.set_last_failed(last_failed_);
  response.set_last_error(last_error_);
}

void ClosureScheduler::Fill(v1::JobStatus& status) const {
  status.set_step(completed_count_);
  if (!stop_reason_.empty()) {
    status.set_stopped_at_step(completed_count_);
    status.set_stop_reason(stop_reason_);
  }
  status.set_completed_prefix(prefix_);
  status.clear_completed_beyond();
  for (int64_t id : completed_beyond_) status.add_completed_beyond(id);
  status.set_closures_rerun(rerun_);
  status.clear_recent_results();
  for (const v1::ClosureResult& result : recent_) {
    *status.add_recent_results() = result;
  }
  for (const auto& [name, reported] : metrics_) {
    (*status.mutable_metrics())[name] = reported.value;
  }
  if (client_scheduled_) {
    // Held calls too: the save that accepts them may be any save.
    status.set_calls_scheduled(steps_);
    status.set_batches_scheduled(batches_);
    status.set_scheduling_finished(scheduling_finished_);
    status.clear_pending_calls();
    for (const auto& [id, call] : calls_) *status.add_pending_calls() = call;
    status.set_calls_failed(failed_);
    status.set_first_failed_call(first_failed_);
    status.set_first_call_error(first_error_);
    status.set_last_failed_call(last_failed_);
    status.set_last_call_error(last_error_);
  }
}

}  // namespace cohort::coordinator
