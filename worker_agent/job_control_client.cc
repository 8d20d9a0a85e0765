#include "worker_agent/job_control_client.h"

#include "cohort/v1/job.grpc.pb.h"
#include "rpc/channel.h"
#include "rpc/reportable.h"

namespace cohort::agent {
namespace {

class GrpcJobControlClient final : public JobControlClient {
 public:
  GrpcJobControlClient(const std::string& address,
                       const rpc::Security& security)
      : connection_(address, security),
        stub_(v1::JobControl::NewStub(connection_.channel())) {}

  absl::StatusOr<v1::AgentSyncResponse> Sync(const v1::AgentJobReport& report,
                                             absl::Duration timeout) override {
    v1::AgentJobReport repaired;
    v1::AgentSyncResponse response;
    auto context = connection_.NewContext(timeout);
    const grpc::Status status = stub_->Sync(
        context.get(), rpc::Reportable(report, repaired), &response);
    if (!status.ok()) return connection_.Annotate("JobControl.Sync", status);
    return response;
  }

  absl::StatusOr<std::string> FetchLibrary(const std::string& digest,
                                           absl::Duration timeout) override {
    v1::FetchLibraryRequest request;
    request.set_digest(digest);
    v1::FetchLibraryResponse response;
    auto context = connection_.NewContext(timeout);
    const grpc::Status status =
        stub_->FetchLibrary(context.get(), request, &response);
    if (!status.ok()) {
      return connection_.Annotate("JobControl.FetchLibrary", status);
    }
    return std::move(*response.mutable_library());
  }

  absl::StatusOr<v1::ClosureResponse> RunClosures(
      const v1::ClosureRequest& request, absl::Duration timeout) override {
    v1::ClosureRequest repaired;
    v1::ClosureResponse response;
    auto context = connection_.NewContext(timeout);
    const grpc::Status status = stub_->RunClosures(
        context.get(), rpc::Reportable(request, repaired), &response);
    if (!status.ok()) {
      return connection_.Annotate("JobControl.RunClosures", status);
    }
    return response;
  }

 private:
  const rpc::Connection connection_;
  const std::unique_ptr<v1::JobControl::Stub> stub_;
};

}  // namespace

std::shared_ptr<JobControlClient> NewGrpcJobControlClient(
    const std::string& address, const rpc::Security& security) {
  return std::make_shared<GrpcJobControlClient>(address, security);
}

}  // namespace cohort::agent
