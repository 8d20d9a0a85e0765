#pragma once

// Callback-API unary handlers in one line: authenticate, run a short
// function, finish with its status (HandleUnary), or park the call and
// finish it later (ParkUnary).
//
//   grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx,
//                                 const Req* req, Resp* resp) override {
//     return HandleUnary(ctx, auth_, [&] { return manager_->Get(*req, resp);
//     });
//   }

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>

#include "rpc/auth.h"
#include "rpc/status_conversion.h"

namespace cohort::rpc {

// `fn` must not block: it runs on a gRPC thread. `auth` is not owned.
template <typename Fn>
grpc::ServerUnaryReactor* HandleUnary(grpc::CallbackServerContext* context,
                                      const Authenticator* auth, Fn&& fn) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status status = auth->Check(*context);
  if (status.ok()) status = fn();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// For calls that wait (a store key, a barrier): authenticates, then hands
// `start` a `finish(absl::Status)` to call exactly once, from any thread, when
// the result is ready. `start` must not block; it parks the call.
template <typename Start>
grpc::ServerUnaryReactor* ParkUnary(grpc::CallbackServerContext* context,
                                    const Authenticator* auth, Start&& start) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status status = auth->Check(*context); !status.ok()) {
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  start([reactor](const absl::Status& status) {
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

}  // namespace cohort::rpc
