// The Client's ClusterCoordinator calls: scheduling onto a
// schedule_from_client ParameterServer job, reading the calls and the
// variables, finishing the job.

#include "absl/strings/str_cat.h"
#include "client_lib/src/client_impl.h"
#include "cohort/client.h"
#include "common/status_macros.h"
#include "rpc/limits.h"

namespace cohort {
namespace {

// A fetch reads every ps task, each within the coordinator's own deadline.
constexpr absl::Duration kMinFetchTimeout = absl::Seconds(30);

}  // namespace

absl::StatusOr<std::vector<int64_t>> Client::Schedule(
    const std::string& job_id,
    const std::vector<v1::ScheduledCall>& calls) const {
  if (job_id.empty()) return absl::InvalidArgumentError("no job id given");
  v1::ScheduleRequest request;
  request.set_job_id(job_id);
  for (const v1::ScheduledCall& call : calls) *request.add_calls() = call;
  v1::ScheduleResponse response;
  auto context = impl_->connection.NewContext(impl_->rpc_timeout);
  const grpc::Status status =
      impl_->jobs->Schedule(context.get(), request, &response);
  COHORT_RETURN_IF_ERROR(impl_->connection.Annotate("Jobs.Schedule", status));
  if (response.ids_size() != static_cast<int>(calls.size())) {
    return absl::InternalError(absl::StrCat(
        "Jobs.Schedule to ", address(), ": ", calls.size(),
        " calls were scheduled and ", response.ids_size(), " ids came back"));
  }
  return std::vector<int64_t>(response.ids().begin(), response.ids().end());
}

absl::StatusOr<v1::GetCallsResponse> Client::GetCalls(
    const std::string& job_id, const std::vector<int64_t>& ids) const {
  if (job_id.empty()) return absl::InvalidArgumentError("no job id given");
  v1::GetCallsRequest request;
  request.set_job_id(job_id);
  for (int64_t id : ids) request.add_ids(id);
  v1::GetCallsResponse response;
  auto context = impl_->connection.NewContext(impl_->rpc_timeout);
  const grpc::Status status =
      impl_->jobs->GetCalls(context.get(), request, &response);
  COHORT_RETURN_IF_ERROR(impl_->connection.Annotate("Jobs.GetCalls", status));
  return response;
}

absl::Status Client::FinishJob(const std::string& job_id) const {
  if (job_id.empty()) return absl::InvalidArgumentError("no job id given");
  v1::FinishJobRequest request;
  request.set_job_id(job_id);
  v1::FinishJobResponse response;
  auto context = impl_->connection.NewContext(impl_->rpc_timeout);
  const grpc::Status status =
      impl_->jobs->FinishJob(context.get(), request, &response);
  return impl_->connection.Annotate("Jobs.FinishJob", status);
}

absl::StatusOr<std::map<std::string, HostTensor>> Client::FetchVariables(
    const std::string& job_id, const std::vector<std::string>& names) const {
  if (job_id.empty()) return absl::InvalidArgumentError("no job id given");
  v1::FetchVariablesRequest request;
  request.set_job_id(job_id);
  for (const std::string& name : names) request.add_names(name);
  v1::FetchVariablesResponse response;
  auto context = impl_->connection.NewContext(
      std::max(impl_->rpc_timeout, kMinFetchTimeout));
  const grpc::Status status =
      impl_->jobs->FetchVariables(context.get(), request, &response);
  COHORT_RETURN_IF_ERROR(
      impl_->connection.Annotate("Jobs.FetchVariables", status));
  std::map<std::string, HostTensor> variables;
  for (v1::VariableValue& value : *response.mutable_variables()) {
    HostTensor& tensor = variables[value.name()];
    tensor.dtype = value.dtype();
    tensor.shape.assign(value.shape().begin(), value.shape().end());
    tensor.bytes = std::move(*value.mutable_value());
  }
  return variables;
}

}  // namespace cohort
