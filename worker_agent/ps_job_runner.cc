#include "worker_agent/ps_job_runner.h"

#include "absl/strings/str_cat.h"
#include "rpc/status_conversion.h"
#include "spdlog/spdlog.h"
#include "worker_agent/closure_exchange.h"
#include "worker_agent/job_loader.h"
#include "worker_agent/ps_replica_context.h"
#include "worker_agent/user_code.h"

namespace cohort::agent {
PsJobRunner::PsJobRunner(RunnerOptions options)
    : options_(std::move(options)), task_name_(options_.task.ToString()) {
  job_ = JobInfoFor(options_.assignment, options_.task,
                    options_.checkpoint_copies);
  job_.num_replicas = 1;  // each executor is its own sync group
}

PsJobRunner::~PsJobRunner() {
  Abort(absl::CancelledError("the agent stopped the job"));
  lifecycle_.Join();
}

void PsJobRunner::Start() {
  lifecycle_.Start([this] { return Run(); });
}

bool PsJobRunner::done() const { return lifecycle_.done(); }

void PsJobRunner::Abort(const absl::Status& status) {
  lifecycle_.Abort(status);
  absl::MutexLock lock(&mu_);
  if (!stop_.HasBeenNotified()) stop_.Notify();
  for (const auto& server : servers_) server->Abort(status);
}

void PsJobRunner::Fail(const absl::Status& status, bool permanent) {
  if (!lifecycle_.RecordError(status, permanent)) return;
  spdlog::error("job {} {}: {}", options_.assignment.job_id(), task_name_,
                status.ToString());
  Abort(absl::AbortedError("another executor failed"));
}

v1::AgentJobReport PsJobRunner::Report() const {
  v1::AgentJobReport report = lifecycle_.Report();
  absl::MutexLock lock(&mu_);
  report.set_step(closures_done_);
  for (const auto& [metric, value] : last_metrics_) {
    (*report.mutable_metrics())[metric] = value;
  }
  return report;
}

bool PsJobRunner::Run() {
  const v1::AgentJobAssignment& a = options_.assignment;
  spdlog::info("job {} ({}): {} closure executor(s), {} ps task(s)", a.job_id(),
               a.group(), a.local_replicas(), a.ps_addresses_size());
  if (a.device_indices().empty()) {
    // Executors share the devices (slot modulo their count).
    Fail(absl::InternalError("the assignment has no devices for the executors"),
         true);
    return false;
  }
  // Each closure takes a whole global batch: from a stream, this worker's
  // next, as a TF ParameterServer closure takes one from its per-worker
  // dataset; from a data set, global batch k for closure k, wherever it runs.
  absl::StatusOr<LoadedJob> inputs = LoadJob(
      options_, job_,
      {.pipeline = a.node(),
       .num_pipelines = a.num_nodes(),
       .replicas_in_sync = 1,
       .local_batches = 1,
       .global_batch_size = a.spec().global_batch_size() * a.num_nodes(),
       .data_set_as_one_pipeline = true});
  std::vector<std::unique_ptr<PsVariableClient>> servers;
  absl::Status status = inputs.status();
  for (int slot = 0; status.ok() && slot < a.local_replicas(); ++slot) {
    absl::StatusOr<std::unique_ptr<PsVariableClient>> server =
        PsVariableClient::Create(a, options_.security,
                                 absl::StrCat(task_name_, "/", slot));
    status = server.status();
    if (server.ok()) servers.push_back(*std::move(server));
  }
  if (!status.ok()) {
    Fail(status, !IsPeerFailure(status));
    return false;
  }
  functions_ = inputs->functions;
  pipeline_ = std::move(inputs->pipeline);
  {
    absl::MutexLock lock(&stream_mu_);
    stream_ = std::move(inputs->stream);
  }
  {
    absl::MutexLock lock(&mu_);
    servers_ = std::move(servers);
    if (stop_.HasBeenNotified()) {
      for (const auto& server : servers_) {
        server->Abort(absl::CancelledError("stopped"));
      }
    }
  }

  std::vector<std::thread> executors;
  for (int slot = 0; slot < a.local_replicas(); ++slot) {
    executors.emplace_back([this, slot] { RunExecutor(slot); });
  }
  for (std::thread& t : executors) t.join();
  return true;
}

absl::StatusOr<v1::ClosureResponse> PsJobRunner::Exchange(
    int slot, std::vector<v1::ClosureResult>& completed, int want) {
  const v1::AgentJobAssignment& a = options_.assignment;
  v1::ClosureRequest request;
  request.set_job_id(a.job_id());
  request.set_attempt(a.attempt());
  request.mutable_task()->set_type(options_.task.type);
  request.mutable_task()->set_index(options_.task.index);
  request.set_slot(slot);
  request.set_group(a.group());
  for (const v1::ClosureResult& r : completed) *request.add_completed() = r;
  request.set_want(want);
  for (const v1::PsRecovery& r : servers_[slot]->TakeRecoveries()) {
    *request.add_recoveries() = r;
  }
  absl::StatusOr<v1::ClosureResponse> response =
      ExchangeClosures(*options_.job_control, request, stop_);
  if (response.ok()) completed.clear();
  return response;
}

void PsJobRunner::RunExecutor(int slot) {
  const v1::AgentJobAssignment& a = options_.assignment;
  const int device_index = a.device_indices(slot % a.device_indices_size());
  const Device device = options_.devices[device_index];
  if (device.is_cuda()) {
    return Fail(absl::FailedPreconditionError(
                    "ParameterServer executors compute on CPU devices; this "
                    "agent offers CUDA devices (set CUDA_VISIBLE_DEVICES= to "
                    "run it on CPUs)"),
                true);
  }
  PsReplicaContext context(&job_, device, servers_[slot].get());
  if (functions_.init != nullptr) {
    if (absl::Status s = CallUserCode([&] { return functions_.init(context); });
        !s.ok()) {
      return Fail(
          absl::Status(s.code(),
                       absl::StrCat("init function \"", a.spec().init_fn(),
                                    "\" failed: ", s.message())),
          true);
    }
  }
  if (absl::Status s = context.DeclareVariables(); !s.ok()) {
    return Fail(s, !IsPeerFailure(s));
  }
  lifecycle_.SetRunning();
  const std::string worker = absl::StrCat(task_name_, "/", slot);
  std::vector<v1::ClosureResult> completed;
  while (!stop_.HasBeenNotified()) {
    absl::StatusOr<v1::ClosureResponse> response =
        Exchange(slot, completed, /*want=*/1);
    if (!response.ok()) {
      if (absl::IsFailedPrecondition(response.status()) ||
          absl::IsCancelled(response.status())) {
        return;  // the job moved on without this worker
      }
      return Fail(response.status(), false);
    }
    if (response->done()) return;
    if (response->closures().empty()) {
      stop_.WaitForNotificationWithTimeout(absl::Milliseconds(
          std::max<int64_t>(10, response->retry_after_ms())));
      continue;
    }
    const bool scheduled = a.spec().ps().schedule_from_client();
    if (scheduled && response->calls_size() != response->closures_size()) {
      return Fail(absl::InternalError(absl::StrCat(
                      "the coordinator handed out ", response->closures_size(),
                      " closures with ", response->calls_size(), " calls")),
                  /*permanent=*/true);
    }
    for (int i = 0; i < response->closures_size(); ++i) {
      const int64_t closure = response->closures(i);
      if (!scheduled && (closure < 0 || closure >= a.spec().steps())) {
        return Fail(
            absl::InternalError(absl::StrCat(
                "the coordinator handed out closure ", closure,
                ", outside the job's steps [0, ", a.spec().steps(), ")")),
            /*permanent=*/true);
      }
      absl::StatusOr<v1::ClosureResult> result = RunClosure(
          context, closure, scheduled ? &response->calls(i) : nullptr);
      // The ps tasks' failures are retryable; the step's own are not.
      if (!result.ok())
        return Fail(result.status(), !IsPeerFailure(result.status()));
      result->set_worker(worker);
      result->set_time_unix_ms(absl::ToUnixMillis(absl::Now()));
      absl::MutexLock lock(&mu_);
      ++closures_done_;
      for (const auto& [name, value] : result->values()) {
        last_metrics_[name] = value;
      }
      completed.push_back(*std::move(result));
    }
  }
}

absl::StatusOr<v1::ClosureResult> PsJobRunner::RunClosure(
    PsReplicaContext& context, int64_t closure, const v1::ScheduledCall* call) {
  const v1::JobSpec& spec = options_.assignment.spec();
  // A call's own error is its result: the job goes on, as TF's
  // ClusterCoordinator raises it at fetch and join.
  auto call_failed = [closure](const absl::Status& status) {
    v1::ClosureResult failed;
    failed.set_closure(closure);
    failed.set_error(status.ToString());
    return failed;
  };
  bool has_stream;
  {
    absl::MutexLock lock(&stream_mu_);
    has_stream = stream_ != nullptr;
  }
  StepFn fn = functions_.step;
  std::string name = spec.step_fn();
  int64_t batch_index = closure;
  std::vector<double> args;
  if (call != nullptr) {
    name = call->fn();
    batch_index = call->takes_batch() ? call->batch() : -1;
    args.assign(call->args().begin(), call->args().end());
    absl::StatusOr<StepFn> found =
        FindStepFunction(*functions_.registry, spec.library_name(), name);
    if (!found.ok()) return call_failed(found.status());
    fn = *found;
    if (batch_index >= 0 && pipeline_ == nullptr && !has_stream) {
      return call_failed(absl::FailedPreconditionError(
          absl::StrCat("call ", closure, " (", name,
                       ") takes a batch, and the job names no dataset_fn")));
    }
  }
  Batch batch;
  if (has_stream && batch_index >= 0) {
    absl::StatusOr<std::optional<Batch>> next = NextStreamBatch();
    if (!next.ok()) return next.status();
    if (!next->has_value()) {
      // The closure that finds the stream ended trains on nothing and ends
      // training, as TF's OutOfRangeError does.
      v1::ClosureResult ended;
      ended.set_closure(closure);
      absl::MutexLock lock(&stream_mu_);
      ended.set_stop_reason(absl::StrCat(
          "the input stream of ", task_name_, " ended after ",
          stream_->elements_read(), " elements"));
      return ended;
    }
    batch = **std::move(next);
  }
  if (absl::Status s = context.BeginClosure(closure, std::move(args));
      !s.ok()) {
    return s;
  }
  if (pipeline_ != nullptr && batch_index >= 0) {
    absl::StatusOr<Batch> read = CallUserCode(
        [&]() -> absl::StatusOr<Batch> {
          return pipeline_->BatchesForStep(batch_index)[0];
        },
        absl::StrCat("the job's dataset, at closure ", closure, ","));
    // The job's own input failed: permanent, named.
    if (!read.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(task_name_, ": ", read.status().message()));
    }
    batch = *std::move(read);
  }
  if (absl::Status s = CallUserCode([&] { return fn(context, batch); });
      !s.ok()) {
    const absl::Status annotated(
        s.code(),
        absl::StrCat(call != nullptr ? "call \"" : "step \"", name,
                     "\" failed at closure ", closure, ": ", s.message()));
    if (call == nullptr || IsPeerFailure(s)) return annotated;
    return call_failed(annotated);
  }
  return context.EndClosure();
}

absl::StatusOr<std::optional<Batch>> PsJobRunner::NextStreamBatch() {
  absl::MutexLock lock(&stream_mu_);
  absl::StatusOr<std::optional<std::vector<Batch>>> next = CallUserCode(
      [&] { return stream_->NextStep(); }, "the job's input stream");
  if (!next.ok()) {
    // The job's own input failed: permanent, named.
    return absl::FailedPreconditionError(absl::StrCat(
        task_name_, ": ", next.status().message()));
  }
  if (!next->has_value()) return std::nullopt;
  return std::move((**next)[0]);
}

}  // namespace cohort::agent
