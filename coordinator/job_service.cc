#include "coordinator/job_service.h"

#include "absl/strings/str_cat.h"
#include "rpc/unary.h"
#include "spdlog/spdlog.h"

namespace cohort::coordinator {

using rpc::HandleUnary;

JobsService::JobsService(JobManager* manager, LibraryStore* libraries,
                         const rpc::Authenticator* auth, Executor* slow,
                         std::function<absl::Status()> persist)
    : manager_(manager),
      libraries_(libraries),
      auth_(auth),
      slow_(slow),
      persist_(std::move(persist)) {}

grpc::ServerUnaryReactor* JobsService::SubmitJob(
    grpc::CallbackServerContext* context, const v1::SubmitJobRequest* request,
    v1::SubmitJobResponse* response) {
  // Hashing and writing a library of hundreds of MiB takes seconds.
  return rpc::OffloadUnary(context, auth_, slow_, [=, this]() -> absl::Status {
    const v1::JobSpec& spec = request->spec();
    // A spec that will be refused leaves no library behind.
    if (absl::Status valid = ValidateJobSpec(spec); !valid.ok()) return valid;
    if (!request->library().empty()) {
      absl::Status stored =
          libraries_->Put(spec.library_digest(), request->library());
      if (!stored.ok()) return stored;
    } else if (!libraries_->Contains(spec.library_digest())) {
      return absl::InvalidArgumentError(
          "no step library was uploaded with the job, and none with its "
          "digest is stored");
    }
    absl::StatusOr<std::string> id = manager_->Submit(spec, absl::Now());
    if (!id.ok()) return id.status();
    // Acknowledged means saved: a coordinator killed now still runs it.
    if (absl::Status saved = persist_ ? persist_() : absl::OkStatus();
        !saved.ok()) {
      (void)manager_->Cancel(*id, absl::Now());
      return absl::UnavailableError(
          absl::StrCat("the job table could not be saved, so the job was "
                       "not accepted (",
                       saved.message(), ")"));
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
  return HandleUnary(context, auth_, [&]() -> absl::Status {
    absl::StatusOr<v1::JobStatus> status =
        manager_->Cancel(request->job_id(), absl::Now());
    if (!status.ok()) return status.status();
    // The cancellation holds across a coordinator restart once saved; the
    // job loop retries a failed save.
    if (persist_) (void)persist_();
    *response->mutable_job() = *std::move(status);
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
    *response = manager_->Sync(*request, absl::Now());
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
        manager_->RunClosures(*request, absl::Now());
    if (!result.ok()) return result.status();
    *response = *std::move(result);
    return absl::OkStatus();
  });
}

}  // namespace cohort::coordinator
