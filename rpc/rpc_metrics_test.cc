// The RPC metrics of a real server: a client that calls made-up methods
// cannot grow the metric registry, which /metrics renders on every scrape.

#include "rpc/rpc_metrics.h"

#include <grpcpp/generic/generic_stub.h>

#include "absl/strings/str_cat.h"
#include "common/log_buffer.h"
#include "common/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/channel.h"
#include "rpc/log_service.h"
#include "rpc/server.h"
#include "rpc/stream_pump.h"

namespace cohort::rpc {
namespace {

using ::testing::HasSubstr;

// Calls `method` with an empty request and returns the status.
grpc::Status CallGeneric(const Connection& connection,
                         const std::string& method) {
  grpc::GenericStub stub(connection.channel());
  std::unique_ptr<grpc::ClientContext> context =
      connection.NewContext(absl::Seconds(30));
  grpc::CompletionQueue cq;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  grpc::Status status;
  auto call = stub.PrepareUnaryCall(context.get(), method, request, &cq);
  call->StartCall();
  call->Finish(&response, &status, /*tag=*/&status);
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok)) return grpc::Status(grpc::INTERNAL, "queue shut");
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

TEST(RpcMetricsTest, MadeUpMethodsShareOneLabel) {
  RpcServer server(ServerOptions{});
  ASSERT_TRUE(server.Start().ok());
  Connection connection(server.DialAddress(), Security{});

  for (int i = 0; i < 3; ++i) {
    const grpc::Status status =
        CallGeneric(connection, absl::StrCat("/made.up.Service/Method", i));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED)
        << status.error_message();
  }
  // Known methods keep their own label, whatever the call's outcome.
  CallGeneric(connection, "/grpc.health.v1.Health/Check");
  CallGeneric(connection,
              "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo");
  server.Shutdown();

  const std::string text = MetricRegistry::Default().Render();
  EXPECT_EQ(text.find("made.up"), std::string::npos);
  EXPECT_THAT(text, HasSubstr("{method=\"unknown\"}"));
  EXPECT_THAT(text, HasSubstr("{method=\"/grpc.health.v1.Health/Check\""));
  EXPECT_THAT(text, HasSubstr("{method=\"/grpc.reflection.v1alpha."
                              "ServerReflection/ServerReflectionInfo\""));
}

// Reflection never sees the token: a server that wants one leaves it out,
// rather than list its services to anyone.
TEST(RpcServerTest, AServerWithATokenServesNoReflection) {
  constexpr char kReflection[] =
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  RpcServer open(ServerOptions{});
  ASSERT_TRUE(open.Start().ok());
  EXPECT_NE(CallGeneric(Connection(open.DialAddress(), Security{}), kReflection)
                .error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  // With a service of its own, as every daemon's server has.
  LogBuffer buffer(1 << 20);
  StreamPump pump(absl::Milliseconds(100));
  const Authenticator auth(std::string("secret"));
  LogService logs(&buffer, &auth, &pump);
  RpcServer guarded(ServerOptions{.security = {.token = "secret"}});
  guarded.AddService(&logs);
  const absl::Status started = guarded.Start();
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_EQ(
      CallGeneric(Connection(guarded.DialAddress(), Security{}), kReflection)
          .error_code(),
      grpc::StatusCode::UNIMPLEMENTED);
}

}  // namespace
}  // namespace cohort::rpc
