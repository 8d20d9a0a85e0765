#include "coordinator/job_service.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/steady_time.h"
#include "coordinator/job_tasks.h"
#include "coordinator/job_watch.h"
#include "coordinator/trace_collector.h"
#include "coordinator/variable_fetcher.h"
#include "rpc/limits.h"
#include "rpc/unary.h"
#include "spdlog/spdlog.h"

namespace cohort::coordinator {

using rpc::HandleUnary;

namespace {

constexpr absl::Duration kFetchTimeout = absl::Seconds(10);
// Room under the message limit for the names and shapes.
constexpr int64_t kMaxFetchBytes = rpc::kMaxMessageBytes - (1 << 20);

}  // namespace

JobsService::JobsService(JobManager* manager, LibraryStore* libraries,
                         const rpc::Authenticator* auth, Executor* slow,
                         Executor* fan_out,
                         std::function<absl::Status()> persist,
                         rpc::Security ps_security, rpc::StreamPump* pump)
    : manager_(manager),
      libraries_(libraries),
      auth_(auth),
      slow_(slow),
      fan_out_(fan_out),
      persist_(std::move(persist)),
      ps_security_(std::move(ps_security)),
      pump_(pump) {}

absl::Status JobsService::Persist(
    absl::FunctionRef<std::string(absl::string_view cause)> explain) {
  absl::Status saved = persist_ ? persist_() : absl::OkStatus();
  if (saved.ok()) return saved;
  return absl::InternalError(explain(saved.message()));
}

absl::Status JobsService::PersistOrRefuse(absl::string_view what) {
  return Persist([&](absl::string_view cause) {
    return absl::StrCat("the job table could not be saved, so ", what,
                        " not accepted (", cause, ")");
  });
}

grpc::ServerUnaryReactor* JobsService::SubmitJob(
    grpc::CallbackServerContext* context, const v1::SubmitJobRequest* request,
    v1::SubmitJobResponse* response) {
  // Hashing and writing a library of hundreds of MiB takes seconds.
  return rpc::OffloadUnary(context, auth_, slow_, [=, this]() -> absl::Status {
    const v1::JobSpec& spec = request->spec();
    // A spec that will be refused leaves no library behind.
    COHORT_RETURN_IF_ERROR(manager_->CheckSubmittable(spec));
    // A retry of an acknowledged submission, even with the table full (not
    // of one still being saved: submit_mu_).
    absl::StatusOr<std::optional<std::string>> earlier = [&] {
      absl::MutexLock lock(&submit_mu_);
      return manager_->FindSubmission(spec);
    }();
    if (!earlier.ok()) return earlier.status();
    if (earlier->has_value()) {
      spdlog::info("job {}: submission {} repeated", **earlier,
                   spec.submission_id());
      response->set_job_id(**earlier);
      return absl::OkStatus();
    }
    if (absl::Status room = manager_->CheckRoomForAJob(); !room.ok()) {
      return room;
    }
    if (!request->library().empty()) {
      absl::Status stored =
          libraries_->Put(spec.library_digest(), request->library());
      if (!stored.ok()) return stored;
    } else if (!libraries_->Use(spec.library_digest())) {
      return absl::InvalidArgumentError(
          "no step library was uploaded with the job, and none with its "
          "digest is stored");
    }
    // One submission at a time from here: a retry racing its original
    // finds the job saved, or withdrawn with its submission_id.
    absl::MutexLock lock(&submit_mu_);
    // A caller who gave up while another submission was saved retries, or
    // not: either way this one is not made (its library, stored above, is
    // kept as any unused one is, for the grace period).
    COHORT_RETURN_IF_ERROR(rpc::StillWanted(*context));
    bool repeated = false;
    absl::StatusOr<std::string> id =
        manager_->Submit(spec, SteadyNow(), &repeated);
    if (!id.ok()) return id.status();
    if (repeated) {
      spdlog::info("job {}: submission {} repeated", *id, spec.submission_id());
      response->set_job_id(*id);
      return absl::OkStatus();
    }
    // Acknowledged means saved: a coordinator killed now still runs it.
    if (absl::Status saved = PersistOrRefuse("the job was"); !saved.ok()) {
      manager_->Withdraw(
          *id, SteadyNow(),
          "not accepted: the job table could not be saved at submission");
      return saved;
    }
    spdlog::info("job {} submitted: {} {} steps, global batch {}, library {}",
                 *id, spec.step_fn(), spec.steps(), spec.global_batch_size(),
                 spec.library_name());
    response->set_job_id(*id);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobsService::GetJob(
    grpc::CallbackServerContext* context, const v1::GetJobRequest* request,
    v1::JobStatus* response) {
  return HandleUnary(context, auth_, [&]() -> absl::Status {
    absl::StatusOr<v1::JobStatus> status = manager_->Get(request->job_id());
    if (!status.ok()) return status.status();
    *response = *std::move(status);
    return absl::OkStatus();
  });
}

grpc::ServerWriteReactor<v1::JobStatus>* JobsService::WatchJob(
    grpc::CallbackServerContext* context, const v1::GetJobRequest* request) {
  if (absl::Status status = auth_->Check(*context); !status.ok()) {
    return new rpc::RefusedWriter<v1::JobStatus>(rpc::ToGrpcStatus(status));
  }
  auto* watch = new JobWatch(pump_, manager_, request->job_id());
  watch->Begin();
  return watch;
}

grpc::ServerUnaryReactor* JobsService::ListJobs(
    grpc::CallbackServerContext* context, const v1::ListJobsRequest* request,
    v1::ListJobsResponse* response) {
  return HandleUnary(context, auth_, [&] {
    for (v1::JobStatus& job : manager_->List()) {
      *response->add_jobs() = std::move(job);
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobsService::CancelJob(
    grpc::CallbackServerContext* context, const v1::CancelJobRequest* request,
    v1::CancelJobResponse* response) {
  // The save writes the table to disk.
  return rpc::OffloadUnary(context, auth_, slow_, [=, this]() -> absl::Status {
    absl::StatusOr<v1::JobStatus> status =
        manager_->Cancel(request->job_id(), SteadyNow());
    if (!status.ok()) return status.status();
    // The cancellation holds across a coordinator restart once saved. Not
    // saved, the caller is told: the job loop retries the save, but a
    // restart before it succeeds would run the job again. Cancelling again
    // is harmless and saves again.
    COHORT_RETURN_IF_ERROR(Persist([&](absl::string_view cause) {
      return absl::StrCat(
          "job ", request->job_id(),
          " is cancelled, but the job table could not be saved (", cause,
          "): a coordinator restarted before the next save would run it "
          "again; cancel it again once the state dir is writable");
    }));
    *response->mutable_job() = *std::move(status);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobsService::Schedule(
    grpc::CallbackServerContext* context, const v1::ScheduleRequest* request,
    v1::ScheduleResponse* response) {
  // The save writes the table to disk.
  return rpc::OffloadUnary(context, auth_, slow_, [=, this]() -> absl::Status {
    // One batch of calls is held at a time, from scheduling to its save.
    absl::MutexLock lock(&schedule_mu_);
    // A client told that a call which waited past its deadline failed may
    // schedule again: the calls are not made. (A deadline that passes
    // during the save itself is not seen: the window narrows, no more.)
    COHORT_RETURN_IF_ERROR(rpc::StillWanted(*context));
    absl::StatusOr<std::vector<int64_t>> ids = manager_->Schedule(
        request->job_id(), {request->calls().begin(), request->calls().end()},
        SteadyNow());
    if (!ids.ok()) return ids.status();
    // Not saved, the calls are taken back before any runs: the client is
    // told, and schedules them again without running them twice.
    absl::Status saved = PersistOrRefuse("the calls were");
    manager_->ScheduleSaved(request->job_id(), saved.ok());
    if (!saved.ok()) return saved;
    for (int64_t id : *ids) response->add_ids(id);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobsService::GetCalls(
    grpc::CallbackServerContext* context, const v1::GetCallsRequest* request,
    v1::GetCallsResponse* response) {
  return HandleUnary(context, auth_, [&]() -> absl::Status {
    absl::StatusOr<v1::GetCallsResponse> calls =
        manager_->GetCalls(*request, SteadyNow());
    if (!calls.ok()) return calls.status();
    *response = *std::move(calls);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobsService::FinishJob(
    grpc::CallbackServerContext* context, const v1::FinishJobRequest* request,
    v1::FinishJobResponse* response) {
  return rpc::OffloadUnary(context, auth_, slow_, [=, this]() -> absl::Status {
    absl::Status finished =
        manager_->FinishScheduling(request->job_id(), SteadyNow());
    if (!finished.ok()) return finished;
    // As a cancellation: it holds here at once, and across a restart once
    // saved. Finishing again is harmless and saves again.
    return Persist([&](absl::string_view cause) {
      return absl::StrCat(
          "job ", request->job_id(),
          " has finished scheduling, but the job table could not be saved (",
          cause,
          "): a coordinator restarted before the next save would wait for "
          "more calls; finish it again once the state dir is writable");
    });
  });
}

grpc::ServerUnaryReactor* JobsService::GetTrace(
    grpc::CallbackServerContext* context, const v1::GetTraceRequest* request,
    v1::TraceData* response) {
  // Asking the agents waits on them.
  return rpc::OffloadUnary(
      context, auth_, fan_out_, [=, this]() -> absl::Status {
        absl::StatusOr<v1::JobStatus> job = manager_->Get(request->job_id());
        if (!job.ok()) return job.status();
        std::vector<std::pair<std::string, std::string>> agents;
        for (const TaskId& task :
             JobTasks(*job, manager_->spec(), /*with_ps=*/false)) {
          agents.emplace_back(task.ToString(), *manager_->spec().address(task));
        }
        absl::StatusOr<v1::TraceData> trace = CollectTrace(
            agents, ps_security_, request->job_id(), job->uid(), kFetchTimeout);
        if (!trace.ok()) return trace.status();
        *response = *std::move(trace);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* JobsService::FetchVariables(
    grpc::CallbackServerContext* context,
    const v1::FetchVariablesRequest* request,
    v1::FetchVariablesResponse* response) {
  // Reading the ps tasks waits on them.
  return rpc::OffloadUnary(
      context, auth_, fan_out_, [=, this]() -> absl::Status {
        absl::StatusOr<std::vector<std::string>> addresses =
            manager_->PsAddresses(request->job_id(), SteadyNow());
        if (!addresses.ok()) return addresses.status();
        absl::StatusOr<v1::JobStatus> job = manager_->Get(request->job_id());
        if (!job.ok()) return job.status();
        absl::StatusOr<std::vector<v1::VariableValue>> values =
            FetchPsVariables(*addresses, ps_security_, request->job_id(),
                             job->uid(),
                             {request->names().begin(), request->names().end()},
                             kFetchTimeout, kMaxFetchBytes);
        if (!values.ok()) return values.status();
        for (v1::VariableValue& value : *values) {
          *response->add_variables() = std::move(value);
        }
        return absl::OkStatus();
      });
}

JobControlService::JobControlService(JobManager* manager,
                                     const LibraryStore* libraries,
                                     const rpc::Authenticator* auth,
                                     Executor* slow)
    : manager_(manager), libraries_(libraries), auth_(auth), slow_(slow) {}

grpc::ServerUnaryReactor* JobControlService::Sync(
    grpc::CallbackServerContext* context, const v1::AgentJobReport* request,
    v1::AgentSyncResponse* response) {
  return HandleUnary(context, auth_, [&] {
    *response = manager_->Sync(*request, SteadyNow());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobControlService::FetchLibrary(
    grpc::CallbackServerContext* context,
    const v1::FetchLibraryRequest* request,
    v1::FetchLibraryResponse* response) {
  return rpc::OffloadUnary(context, auth_, slow_, [=, this]() -> absl::Status {
    absl::StatusOr<std::string> bytes = libraries_->Get(request->digest());
    if (!bytes.ok()) return bytes.status();
    response->set_library(*std::move(bytes));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobControlService::RunClosures(
    grpc::CallbackServerContext* context, const v1::ClosureRequest* request,
    v1::ClosureResponse* response) {
  return HandleUnary(context, auth_, [&]() -> absl::Status {
    absl::StatusOr<v1::ClosureResponse> result =
        manager_->RunClosures(*request, SteadyNow());
    if (!result.ok()) return result.status();
    *response = *std::move(result);
    return absl::OkStatus();
  });
}

}  // namespace cohort::coordinator
