#pragma once

// Callback-API unary handlers in one line: authenticate, run a short
// function, finish with its status (HandleUnary), park the call and finish
// it later (ParkUnary), or run a slow function on an executor
// (OffloadUnary).
//
//   grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx,
//                                 const Req* req, Resp* resp) override {
//     return HandleUnary(ctx, auth_, [&] { return manager_->Get(*req, resp);
//     });
//   }

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>

#include <chrono>

#include "common/executor.h"
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

// DEADLINE_EXCEEDED once the caller has given up (cancelled, or past its
// deadline): a call that waited for its turn checks before it acts, as the
// caller was told it failed.
inline absl::Status StillWanted(const grpc::CallbackServerContext& context) {
  if (context.IsCancelled() ||
      std::chrono::system_clock::now() > context.deadline()) {
    return absl::DeadlineExceededError(
        "the caller gave up while the call waited to run; nothing was done");
  }
  return absl::OkStatus();
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

// For slow work (hashing or writing a large file): authenticates, then runs
// `fn` on `executor` and finishes with its status, so that no gRPC thread,
// which may be needed to answer a heartbeat, waits on it. The request and
// response stay valid until then. A call whose caller gave up while it
// waited in the queue is not run, so that a client retrying after
// DEADLINE_EXCEEDED does not find it done twice. `executor` is not owned.
template <typename Fn>
grpc::ServerUnaryReactor* OffloadUnary(grpc::CallbackServerContext* context,
                                       const Authenticator* auth,
                                       Executor* executor, Fn&& fn) {
  return ParkUnary(
      context, auth,
      [context, executor, fn = std::forward<Fn>(fn)](auto finish) mutable {
        executor->Post([context, fn = std::move(fn), finish]() mutable {
          absl::Status wanted = StillWanted(*context);
          finish(wanted.ok() ? fn() : wanted);
        });
      });
}

}  // namespace cohort::rpc
