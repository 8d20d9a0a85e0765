#include "worker_agent/attempt_lifecycle.h"

namespace cohort::agent {

void AttemptLifecycle::Start(std::function<bool()> body) {
  thread_ = std::thread([this, body = std::move(body)] {
    const bool finished = body();
    absl::MutexLock lock(&mu_);
    if (error_.ok() && !aborted_.ok()) error_ = aborted_;
    state_ = finished && error_.ok() ? v1::AgentJobReport::FINISHED
                                     : v1::AgentJobReport::FAILED;
  });
}

void AttemptLifecycle::Join() {
  if (thread_.joinable()) thread_.join();
}

void AttemptLifecycle::SetRunning() {
  absl::MutexLock lock(&mu_);
  if (state_ == v1::AgentJobReport::LOADING) {
    state_ = v1::AgentJobReport::RUNNING;
  }
}

bool AttemptLifecycle::RecordError(const absl::Status& status, bool permanent,
                                   bool agent_left) {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return false;
  error_ = status;
  permanent_ = permanent;
  agent_left_ = agent_left;
  return true;
}

void AttemptLifecycle::Abort(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (aborted_.ok()) aborted_ = why;
}

absl::Status AttemptLifecycle::error() const {
  absl::MutexLock lock(&mu_);
  return error_;
}

bool AttemptLifecycle::done() const {
  absl::MutexLock lock(&mu_);
  return state_ == v1::AgentJobReport::FINISHED ||
         state_ == v1::AgentJobReport::FAILED;
}

v1::AgentJobReport AttemptLifecycle::Report() const {
  v1::AgentJobReport report;
  report.set_job_id(assignment_->job_id());
  report.set_attempt(assignment_->attempt());
  report.set_group(assignment_->group());
  report.set_job_uid(assignment_->job_uid());
  absl::MutexLock lock(&mu_);
  report.set_state(state_);
  if (!error_.ok()) {
    report.set_error(std::string(error_.message()));
    report.set_permanent(permanent_);
    report.set_agent_left(agent_left_);
  }
  return report;
}

}  // namespace cohort::agent
