#include "task/task_session.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/steady_time.h"
#include "spdlog/spdlog.h"

namespace cohort::task {
namespace {

bool IsRefusal(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument ||
         code == absl::StatusCode::kPermissionDenied ||
         code == absl::StatusCode::kUnauthenticated ||
         code == absl::StatusCode::kFailedPrecondition ||
         // Not a coordinator at all (an agent's or a ps task's address).
         code == absl::StatusCode::kUnimplemented;
}

}  // namespace

TaskSession::TaskSession(TaskSessionOptions options)
    : options_(std::move(options)),
      connection_(options_.coordinator_address, options_.security),
      stub_(cohort::v1::Coordinator::NewStub(connection_.channel())) {}

TaskSession::~TaskSession() { Shutdown(); }

void TaskSession::Start() {
  thread_ = std::thread([this] { Run(); });
}

bool TaskSession::registered() const {
  absl::MutexLock lock(&mu_);
  return !session_id_.empty();
}

absl::Status TaskSession::last_status() const {
  absl::MutexLock lock(&mu_);
  return last_status_;
}

void TaskSession::Shutdown(absl::string_view reason) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  // Read after the join: a Register in flight when the stop began may have
  // opened a session since, which the coordinator must hear the end of.
  std::string session;
  {
    absl::MutexLock lock(&mu_);
    session = session_id_;
  }
  if (session.empty()) return;
  cohort::v1::DeregisterRequest request;
  *request.mutable_task() = options_.report().task();
  request.set_session_id(session);
  request.set_reason(std::string(reason));
  cohort::v1::DeregisterResponse response;
  auto context = connection_.NewContext(options_.rpc_timeout);
  // Best effort: a coordinator that is gone notices our silence instead.
  stub_->Deregister(context.get(), request, &response);
}

absl::Status TaskSession::Register() {
  cohort::v1::RegisterRequest request;
  *request.mutable_report() = options_.report();
  cohort::v1::RegisterResponse response;
  auto context = connection_.NewContext(options_.rpc_timeout);
  absl::Status status =
      connection_.Annotate("Coordinator.Register",
                           stub_->Register(context.get(), request, &response));
  if (!status.ok()) return status;
  absl::MutexLock lock(&mu_);
  session_id_ = response.session_id();
  if (response.heartbeat_interval_ms() > 0) {
    asked_interval_ = absl::Milliseconds(response.heartbeat_interval_ms());
  }
  return absl::OkStatus();
}

absl::Status TaskSession::Heartbeat() {
  cohort::v1::HeartbeatRequest request;
  *request.mutable_report() = options_.report();
  *request.mutable_task() = request.report().task();
  {
    absl::MutexLock lock(&mu_);
    request.set_session_id(session_id_);
  }
  request.set_sent_unix_ms(absl::ToUnixMillis(absl::Now()));
  cohort::v1::HeartbeatResponse response;
  auto context = connection_.NewContext(options_.rpc_timeout);
  return connection_.Annotate(
      "Coordinator.Heartbeat",
      stub_->Heartbeat(context.get(), request, &response));
}

void TaskSession::Run() {
  const absl::Duration kMaxRetryDelay = absl::Seconds(5);
  absl::Duration retry_delay = absl::Milliseconds(100);
  std::string last_problem;
  absl::Time last_answer = SteadyNow();
  auto stopping = [this] { return stopping_; };
  while (true) {
    const bool have_session = registered();
    absl::Status status = have_session ? Heartbeat() : Register();
    absl::Duration wait;
    {
      absl::MutexLock lock(&mu_);
      last_status_ = status;
      wait = std::min(options_.heartbeat_interval, asked_interval_);
    }
    // Anything but "could not reach it" is an answer.
    if (status.code() != absl::StatusCode::kUnavailable &&
        status.code() != absl::StatusCode::kDeadlineExceeded) {
      last_answer = SteadyNow();
    } else if (SteadyNow() - last_answer >= options_.orphan_timeout) {
      const absl::Status orphaned = absl::UnavailableError(absl::StrCat(
          "the coordinator at ", options_.coordinator_address,
          " has not answered for ",
          absl::FormatDuration(options_.orphan_timeout),
          " (--orphan_timeout); giving up on it: ", status.message()));
      spdlog::error("{}", std::string(orphaned.message()));
      if (options_.on_orphaned) options_.on_orphaned(orphaned);
      return;
    }
    if (status.ok()) {
      if (!have_session) {
        spdlog::info("registered with the coordinator at {}",
                     options_.coordinator_address);
        if (options_.on_registered) options_.on_registered();
      }
      last_problem.clear();
      retry_delay = absl::Milliseconds(100);
    } else if (have_session && status.code() == absl::StatusCode::kNotFound) {
      spdlog::warn(
          "the coordinator no longer knows this task ({}); "
          "registering again",
          std::string(status.message()));
      absl::MutexLock lock(&mu_);
      session_id_.clear();
      wait = absl::ZeroDuration();
    } else if (IsRefusal(status.code())) {
      // Also mid-session: a coordinator restarted on a spec without this
      // task answers its heartbeats "unknown task" for good.
      spdlog::error("the coordinator refused this task: {}", status.ToString());
      if (options_.on_fatal) options_.on_fatal(status);
      return;
    } else {
      if (status.ToString() != last_problem) {
        spdlog::warn("{}; retrying", status.ToString());
        last_problem = status.ToString();
      }
      wait = retry_delay;
      retry_delay = std::min(retry_delay * 2, kMaxRetryDelay);
    }
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping), wait)) return;
  }
}

}  // namespace cohort::task
