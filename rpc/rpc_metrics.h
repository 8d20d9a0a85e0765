#pragma once

// Server-side RPC latency for /metrics: a gRPC interceptor that observes
// every call's handling time into cohort_rpc_server_duration_seconds, by
// method ("/cohort.v1.Admin/GetClusterState") and status code ("OK").
// Streams count from their start to their status. cohort_rpc_server_in_flight
// counts, by method, the calls that arrived and are not over. Methods this
// binary does not know share the label "unknown".

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <vector>

namespace cohort::rpc {

// What ServerBuilder::experimental().SetInterceptorCreators takes. Records
// into MetricRegistry::Default().
std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
RpcMetricsInterceptors();

}  // namespace cohort::rpc
