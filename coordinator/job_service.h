#pragma once

// gRPC adapters of the job API: Jobs (users: submit, get, list, cancel) and
// JobControl (agents: sync, fetch a library). Each handler authenticates,
// then does its work in the JobManager or the LibraryStore.

#include <functional>

#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "cohort/v1/job.grpc.pb.h"
#include "common/executor.h"
#include "coordinator/job_manager.h"
#include "coordinator/library_store.h"
#include "rpc/auth.h"
#include "rpc/security.h"
#include "rpc/stream_pump.h"

namespace cohort::coordinator {

// `manager`, `libraries`, `auth`, `slow`, `fan_out` and `pump` are not owned
// and must outlive the service. Library uploads are hashed and written on
// `slow`, never on a gRPC thread. Thread-safe.
class JobsService final : public v1::Jobs::CallbackService {
 public:
  // `persist` saves the job table (JobLoop::SaveNow); null: nothing is
  // saved. `ps_security` reaches the ps tasks, for FetchVariables, and the
  // agents, for GetTrace; both wait on other hosts, up to seconds each, so
  // they run on `fan_out`, where they cannot hold up a submission.
  JobsService(JobManager* manager, LibraryStore* libraries,
              const rpc::Authenticator* auth, Executor* slow, Executor* fan_out,
              std::function<absl::Status()> persist, rpc::Security ps_security,
              rpc::StreamPump* pump);

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const v1::SubmitJobRequest* request,
                                      v1::SubmitJobResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request,
                                   v1::JobStatus* response) override;
  grpc::ServerWriteReactor<v1::JobStatus>* WatchJob(
      grpc::CallbackServerContext* context,
      const v1::GetJobRequest* request) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* request,
                                      v1::CancelJobResponse* response) override;
  grpc::ServerUnaryReactor* Schedule(grpc::CallbackServerContext* context,
                                     const v1::ScheduleRequest* request,
                                     v1::ScheduleResponse* response) override;
  grpc::ServerUnaryReactor* GetCalls(grpc::CallbackServerContext* context,
                                     const v1::GetCallsRequest* request,
                                     v1::GetCallsResponse* response) override;
  grpc::ServerUnaryReactor* FinishJob(grpc::CallbackServerContext* context,
                                      const v1::FinishJobRequest* request,
                                      v1::FinishJobResponse* response) override;
  grpc::ServerUnaryReactor* GetTrace(grpc::CallbackServerContext* context,
                                     const v1::GetTraceRequest* request,
                                     v1::TraceData* response) override;
  grpc::ServerUnaryReactor* FetchVariables(
      grpc::CallbackServerContext* context,
      const v1::FetchVariablesRequest* request,
      v1::FetchVariablesResponse* response) override;

 private:
  // Saves the table, as an acknowledged call must survive a coordinator
  // restart. When it cannot: INTERNAL with the message `explain` makes of
  // the cause. Not UNAVAILABLE: the coordinator was reached and answered,
  // and a client taking the answer as lost would send (and upload) again.
  absl::Status Persist(
      absl::FunctionRef<std::string(absl::string_view cause)> explain);
  // Persist for a call not accepted unsaved; `what` comes with its verb:
  // "the calls were".
  absl::Status PersistOrRefuse(absl::string_view what);

  JobManager* const manager_;
  LibraryStore* const libraries_;
  const rpc::Authenticator* const auth_;
  Executor* const slow_;
  Executor* const fan_out_;
  const std::function<absl::Status()> persist_;
  const rpc::Security ps_security_;
  rpc::StreamPump* const pump_;
  // Held from scheduling calls to their save (JobManager::ScheduleSaved).
  absl::Mutex schedule_mu_;
  // Held from a submission's entry in the table to its save, and by a
  // retry's look for it.
  absl::Mutex submit_mu_;
};

// Same ownership as JobsService; libraries are read on `slow`.
// Thread-safe.
class JobControlService final : public v1::JobControl::CallbackService {
 public:
  JobControlService(JobManager* manager, const LibraryStore* libraries,
                    const rpc::Authenticator* auth, Executor* slow);

  grpc::ServerUnaryReactor* Sync(grpc::CallbackServerContext* context,
                                 const v1::AgentJobReport* request,
                                 v1::AgentSyncResponse* response) override;
  grpc::ServerUnaryReactor* FetchLibrary(
      grpc::CallbackServerContext* context,
      const v1::FetchLibraryRequest* request,
      v1::FetchLibraryResponse* response) override;
  grpc::ServerUnaryReactor* RunClosures(grpc::CallbackServerContext* context,
                                        const v1::ClosureRequest* request,
                                        v1::ClosureResponse* response) override;

 private:
  JobManager* const manager_;
  const LibraryStore* const libraries_;
  const rpc::Authenticator* const auth_;
  Executor* const slow_;
};

}  // namespace cohort::coordinator
