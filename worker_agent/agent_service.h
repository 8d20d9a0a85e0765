#pragma once

// The agent's gRPC service (cohort.v1.Agent).

#include <vector>

#include "cohort/v1/agent.grpc.pb.h"
#include "task/task_runtime.h"

namespace cohort::agent {

// `runtime` is not owned and must outlive the service. Thread-safe.
class AgentService final : public v1::Agent::CallbackService {
 public:
  AgentService(const task::TaskRuntime* runtime,
               std::vector<v1::Device> devices);

  // The report this agent registers and heartbeats with.
  v1::TaskReport Report() const;

  grpc::ServerUnaryReactor* GetAgentStatus(
      grpc::CallbackServerContext* context,
      const v1::GetAgentStatusRequest* request,
      v1::AgentStatus* response) override;
  // Spans of a traced job recorded here (TraceStore::Default()).
  grpc::ServerUnaryReactor* GetTrace(grpc::CallbackServerContext* context,
                                     const v1::GetTraceRequest* request,
                                     v1::TraceData* response) override;

 private:
  const task::TaskRuntime* const runtime_;
  const std::vector<v1::Device> devices_;
  const std::vector<std::string> features_;
};

}  // namespace cohort::agent
