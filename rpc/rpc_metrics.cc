#include "rpc/rpc_metrics.h"

#include <google/protobuf/descriptor.h>

#include <string>

#include "absl/container/node_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/metrics.h"

namespace cohort::rpc {
namespace {

constexpr char kDuration[] = "cohort_rpc_server_duration_seconds";
constexpr char kInFlight[] = "cohort_rpc_server_in_flight";

using grpc::experimental::InterceptionHookPoints;

// Whether `path` ("/package.Service/Method") names a method this binary
// knows: one of a compiled-in proto, or of gRPC's health service.
bool IsKnownMethod(absl::string_view path) {
  if (path == "/grpc.health.v1.Health/Check" ||
      path == "/grpc.health.v1.Health/Watch") {
    return true;
  }
  const size_t slash = path.rfind('/');
  if (path.size() < 2 || path[0] != '/' || slash == 0) return false;
  std::string full_name(path.substr(1));
  full_name[slash - 1] = '.';
  return google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(
             full_name) != nullptr;
}

// The method label of a call: its path when the method is known, else
// "unknown", so that a client calling made-up methods cannot grow the
// registry without bound. Known paths are remembered (they are few), since
// the descriptor pool's lookup takes a process-wide lock; the set's nodes
// never move, so the label is returned by reference, uncopied.
const std::string& MethodLabel(const char* method) {
  static const std::string* const kUnknown = new std::string("unknown");
  static absl::Mutex mu;
  static auto* const known =
      new absl::node_hash_set<std::string>();  // ABSL_GUARDED_BY(mu)
  if (method == nullptr) return *kUnknown;
  const absl::string_view path(method);
  {
    absl::ReaderMutexLock lock(&mu);
    if (auto it = known->find(path); it != known->end()) return *it;
  }
  if (!IsKnownMethod(path)) return *kUnknown;
  absl::MutexLock lock(&mu);
  return *known->emplace(path).first;
}

// One per call; gRPC owns and destroys it.
class DurationInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit DurationInterceptor(const char* method)
      : method_(MethodLabel(method)), start_(absl::Now()) {
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
  const std::string& method_;  // MethodLabel's, which lives forever
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
