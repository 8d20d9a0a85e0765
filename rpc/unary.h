#pragma once

// Callback-API unary handlers in one line: authenticate, run a short
// function, finish with its status.
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

}  // namespace cohort::rpc
