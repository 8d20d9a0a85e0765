#include "ps_server/ps_service.h"

#include "common/host_info.h"
#include "rpc/unary.h"

namespace cohort::ps {

PsService::PsService(const rpc::TaskRuntime* runtime) : runtime_(runtime) {}

v1::TaskReport PsService::Report() const {
  v1::TaskReport report = runtime_->BaseReport();
  v1::PsInfo* ps = report.mutable_ps();
  // One shard per ps task: the shard id is the task index.
  ps->set_shard_id(runtime_->config().task.index);
  // Variables arrive with the ParameterServer strategy; until a job places
  // some here the shard is empty.
  ps->set_variable_bytes(0);
  ps->set_num_variables(0);
  ps->set_rss_bytes(ResidentBytes());
  return report;
}

grpc::ServerUnaryReactor* PsService::GetPsStatus(
    grpc::CallbackServerContext* context, const v1::GetPsStatusRequest* request,
    v1::PsStatus* response) {
  return rpc::HandleUnary(context, runtime_->auth(), [&] {
    *response->mutable_report() = Report();
    response->set_registered(runtime_->registered());
    return absl::OkStatus();
  });
}

}  // namespace cohort::ps
