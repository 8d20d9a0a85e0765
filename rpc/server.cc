#include "rpc/server.h"

#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_builder.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/cluster_spec.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rpc/limits.h"
#include "rpc/rpc_metrics.h"
#include "rpc/tcp_bind.h"
#include "rpc/tuning.h"

namespace cohort::rpc {
namespace {

// Leaves out the reflection service that the process-wide plugin adds to
// every server.
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*
                         plugins) override {
    const std::string reflection =
        grpc::reflection::ProtoServerReflectionPlugin().name();
    std::erase_if(*plugins, [&](const auto& plugin) {
      return plugin->name() == reflection;
    });
  }
};

}  // namespace

absl::Status CheckCanListen(const HostPort& listen) {
  absl::StatusOr<BoundSocket> bound = BindTcp(listen, SOCK_CLOEXEC, 0);
  if (!bound.ok()) return bound.status();
  close(bound->fd);
  return absl::OkStatus();
}

RpcServer::RpcServer(ServerOptions options) : options_(std::move(options)) {}

RpcServer::~RpcServer() { Shutdown(absl::ZeroDuration()); }

void RpcServer::AddService(grpc::Service* service) {
  services_.push_back(service);
}

absl::Status RpcServer::Start() {
  COHORT_ASSIGN_OR_RETURN(
      HostPort listen,
      ParseHostPort(options_.listen, /*allow_port_zero=*/true));
  COHORT_RETURN_IF_ERROR(CheckCanListen(listen));
  // Process-wide switches; they must be set before any server is built.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(listen.ToString(),
                           options_.security.ServerCredentials(), &bound_port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // Without SO_REUSEPORT two daemons could silently share one port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  ApplyTransportTuning(builder);
  builder.experimental().SetInterceptorCreators(RpcMetricsInterceptors());
  for (grpc::Service* service : services_) builder.RegisterService(service);
  // Reflection would answer without the token (it never sees it) and list
  // every service and message to anyone: a server that wants a token
  // serves none.
  if (options_.security.token.has_value() && !options_.async_only) {
    builder.SetOption(std::make_unique<WithoutReflection>());
  }
  if (options_.async_only) {
    cq_ = builder.AddCompletionQueue();
    builder.SetOption(
        std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
    builder.SetOption(std::make_unique<WithoutReflection>());
  }
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || bound_port == 0) {
    server_.reset();
    cq_.reset();
    // Taken between the check and gRPC's bind: ask again for the reason.
    COHORT_RETURN_IF_ERROR(CheckCanListen(listen));
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", listen.ToString(),
                     ": the address is in use or not an address of this host"));
  }
  port_ = bound_port;
  address_ = HostPort{listen.host, port_}.ToString();
  if (auto* health = server_->GetHealthCheckService()) {
    health->SetServingStatus(true);
  }
  if (!options_.port_file.empty()) {
    // A path that cannot be written is the operator's to fix, as a bad flag.
    if (absl::Status written =
            WriteFileAtomically(options_.port_file, absl::StrCat(port_, "\n"));
        !written.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("--port_file: ", written.message()));
    }
  }
  return absl::OkStatus();
}

std::string RpcServer::DialAddress() const {
  return LocalDialAddress(address_);
}

bool RpcServer::AnswersHealthCheck(absl::Duration timeout) {
  if (server_ == nullptr || shut_down_.load()) return false;
  auto stub = grpc::health::v1::Health::NewStub(
      server_->InProcessChannel(grpc::ChannelArguments()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  return stub->Check(&context, request, &response).ok() &&
         response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

void RpcServer::Shutdown(absl::Duration grace) {
  if (server_ == nullptr || shut_down_.exchange(true)) return;
  if (auto* health = server_->GetHealthCheckService()) {
    health->SetServingStatus(false);
  }
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
  if (cq_ != nullptr) cq_->Shutdown();
}

}  // namespace cohort::rpc
