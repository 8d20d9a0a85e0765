#include "rpc/rpc_metrics.h"

#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "common/metrics.h"

namespace cohort::rpc {
namespace {

constexpr char kDuration[] = "cohort_rpc_server_duration_seconds";
constexpr char kInFlight[] = "cohort_rpc_server_in_flight";

using grpc::experimental::InterceptionHookPoints;

// One per call; gRPC owns and destroys it.
class DurationInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit DurationInterceptor(const char* method)
      : method_(method == nullptr ? "unknown" : method), start_(absl::Now()) {
    MetricRegistry::Default().Add(kInFlight, {{"method", method_}}, 1);
  }
  // gRPC destroys the interceptor when the call is over, streams included:
  // a stream whose reader left stops counting only when it really ended.
  ~DurationInterceptor() override {
    MetricRegistry::Default().Add(kInFlight, {{"method", method_}}, -1);
  }

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      const absl::StatusCode code =
          static_cast<absl::StatusCode>(methods->GetSendStatus().error_code());
      MetricRegistry::Default().Observe(
          kDuration,
          {{"method", method_}, {"code", absl::StatusCodeToString(code)}},
          absl::ToDoubleSeconds(absl::Now() - start_));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  const absl::Time start_;
};

class DurationInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new DurationInterceptor(info->method());
  }
};

}  // namespace

std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
RpcMetricsInterceptors() {
  MetricRegistry::Default().DeclareHistogram(
      kDuration,
      "Time from an RPC's arrival to its status, by method and code.",
      LatencyBuckets());
  MetricRegistry::Default().DeclareGauge(
      kInFlight, "RPCs (streams included) that arrived and are not over.");
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      factories;
  factories.push_back(std::make_unique<DurationInterceptorFactory>());
  return factories;
}

}  // namespace cohort::rpc
