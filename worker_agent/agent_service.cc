#include "worker_agent/agent_service.h"

#include "absl/time/clock.h"
#include "rpc/unary.h"
#include "worker_agent/device_discovery.h"
#include "worker_agent/trace_store.h"

namespace cohort::agent {

AgentService::AgentService(const task::TaskRuntime* runtime,
                           std::vector<v1::Device> devices)
    : runtime_(runtime),
      devices_(std::move(devices)),
      features_(BuildFeatures()) {}

v1::TaskReport AgentService::Report() const {
  v1::TaskReport report = runtime_->BaseReport();
  for (const v1::Device& device : devices_) *report.add_devices() = device;
  for (const std::string& feature : features_) report.add_features(feature);
  return report;
}

grpc::ServerUnaryReactor* AgentService::GetAgentStatus(
    grpc::CallbackServerContext* context,
    const v1::GetAgentStatusRequest* request, v1::AgentStatus* response) {
  return rpc::HandleUnary(context, runtime_->auth(), [&] {
    *response->mutable_report() = Report();
    response->set_registered(runtime_->registered());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* AgentService::GetTrace(
    grpc::CallbackServerContext* context, const v1::GetTraceRequest* request,
    v1::TraceData* response) {
  return rpc::HandleUnary(context, runtime_->auth(), [&]() -> absl::Status {
    if (request->clock_only()) {
      response->set_agent_now_unix_ns(absl::GetCurrentTimeNanos());
      return absl::OkStatus();
    }
    absl::StatusOr<v1::TraceData> trace =
        TraceStore::Default().Get(request->job_id(), request->job_uid(),
                                  runtime_->config().task.ToString());
    if (!trace.ok()) return trace.status();
    *response = *std::move(trace);
    return absl::OkStatus();
  });
}

}  // namespace cohort::agent
