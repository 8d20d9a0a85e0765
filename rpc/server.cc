#include "rpc/server.h"

#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_builder.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/cluster_spec.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rpc/limits.h"
#include "rpc/rpc_metrics.h"
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

// Binds once itself as gRPC does (SO_REUSEADDR, so that connections of an
// earlier run still in TIME_WAIT do not count), and passes where any of the
// host's addresses binds, as gRPC needs only one.
absl::Status CheckCanListen(const HostPort& listen) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = absl::StrCat(listen.port);
  if (const int error =
          getaddrinfo(listen.host.c_str(), port.c_str(), &hints, &found);
      error != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot listen on ", listen.ToString(), ": host \"", listen.host,
        "\" does not resolve (", gai_strerror(error), ")"));
  }
  int first_error = 0;
  for (const addrinfo* at = found; at != nullptr; at = at->ai_next) {
    const int fd = socket(at->ai_family, at->ai_socktype, at->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    const bool bound = bind(fd, at->ai_addr, at->ai_addrlen) == 0;
    if (!bound && first_error == 0) first_error = errno;
    close(fd);
    if (bound) {
      freeaddrinfo(found);
      return absl::OkStatus();
    }
  }
  freeaddrinfo(found);
  std::string why;
  switch (first_error) {
    case EADDRINUSE:
      why = absl::StrCat("port ", listen.port,
                         " is in use by another process (`ss -ltnp 'sport = :",
                         listen.port, "'` shows which)");
      break;
    case EADDRNOTAVAIL:
      why = absl::StrCat(listen.host, " is not an address of this host");
      break;
    case EACCES:
      why = absl::StrCat("port ", listen.port, " needs privilege to bind");
      break;
    default:
      why = first_error == 0 ? "no socket could be made for it"
                             : std::strerror(first_error);
  }
  const std::string message =
      absl::StrCat("cannot listen on ", listen.ToString(), ": ", why);
  // A port in use may come free (an earlier instance still stopping); the
  // other causes are the configuration's, and no retry fixes them.
  return first_error == EADDRINUSE ? absl::UnavailableError(message)
                                   : absl::FailedPreconditionError(message);
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
