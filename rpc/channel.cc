#include "rpc/channel.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>

#include <algorithm>
#include <climits>

#include "absl/strings/str_cat.h"
#include "rpc/auth.h"
#include "rpc/limits.h"
#include "rpc/status_conversion.h"
#include "rpc/tuning.h"

namespace cohort::rpc {

Connection::Connection(std::string address, Security security, bool dedicated,
                       absl::Duration connect_timeout)
    : address_(std::move(address)), security_(std::move(security)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Reconnect quickly after a peer restarts instead of backing off for
  // up to two minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  // Despite its name, gRPC takes this as the least time one attempt to
  // connect is given: at 100 ms, a link with a round trip of 100 ms or more
  // never completes a handshake in time.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
              static_cast<int>(std::clamp<int64_t>(
                  absl::ToInt64Milliseconds(connect_timeout), 100, INT_MAX)));
  ApplyTransportTuning(args);
  if (dedicated) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  channel_ =
      grpc::CreateCustomChannel(address_, security_.ChannelCredentials(), args);
}

std::unique_ptr<grpc::ClientContext> Connection::NewContext(
    absl::Duration timeout) const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  if (security_.token.has_value()) {
    context->AddMetadata(std::string(kAuthorizationHeader),
                         absl::StrCat("Bearer ", *security_.token));
  }
  return context;
}

absl::Status Connection::Annotate(absl::string_view method,
                                  const grpc::Status& status) const {
  absl::Status converted = FromGrpcStatus(status);
  if (converted.ok()) return converted;
  // gRPC says nothing more when the server has no such service: the usual
  // cause is an address of another kind of daemon.
  const absl::string_view why =
      converted.code() == absl::StatusCode::kUnimplemented &&
              converted.message().empty()
          ? "the server there does not serve this call; is it the address "
            "of the right daemon (a coordinator's, an agent's, a ps "
            "task's)?"
          : converted.message();
  return absl::Status(converted.code(),
                      absl::StrCat(method, " to ", address_, ": ", why));
}

absl::Status Connection::ProbeConnection(absl::Duration timeout) const {
  // The standard health check: every server of ours answers it, and one
  // without it still answers UNIMPLEMENTED, which proves the connection.
  grpc::CompletionQueue cq;
  grpc::GenericStub stub(channel_);
  std::unique_ptr<grpc::ClientContext> context = NewContext(timeout);
  grpc::Slice empty;  // an empty HealthCheckRequest: the server as a whole
  grpc::ByteBuffer request(&empty, 1), response;
  grpc::Status status;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(context.get(), "/grpc.health.v1.Health/Check",
                            request, &cq);
  call->StartCall();
  call->Finish(&response, &status, nullptr);
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);  // the call's deadline bounds it
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) {
    return absl::OkStatus();
  }
  return FromGrpcStatus(status);
}

}  // namespace cohort::rpc
