#include "coordinator/store_service.h"

#include <algorithm>

#include "common/steady_time.h"
#include "coordinator/job_validation.h"
#include "rpc/limits.h"
#include "rpc/unary.h"

namespace cohort::coordinator {
namespace {

// A wait without a client deadline still ends, though not before any a job
// may set: a rank waits for the NCCL id as long as its collective timeout.
constexpr absl::Duration kMaxWait = absl::Milliseconds(kMaxJobWaitMs + 60'000);

// Ends the wait early enough that its error (naming the key, or the ranks a
// barrier lacks) reaches the client before the client's own deadline. On
// the store's steady clock: gRPC gives the deadline on the wall clock, so
// only what is left of it carries over.
absl::Time WaitDeadline(const grpc::CallbackServerContext& context) {
  const absl::Duration left =
      absl::FromChrono(context.deadline()) - absl::Now();
  return SteadyNow() + std::min(left - rpc::kStoreReplyGrace, kMaxWait);
}

// A parked call's context stays valid until the store finishes it, and
// IsCancelled is thread-safe: the store may ask from its expiry thread.
StoreManager::Abandoned Abandoned(grpc::CallbackServerContext* context) {
  return [context] { return context->IsCancelled(); };
}

}  // namespace

StoreService::StoreService(StoreManager* manager,
                           const rpc::Authenticator* auth)
    : manager_(manager), auth_(auth) {}

grpc::ServerUnaryReactor* StoreService::Set(
    grpc::CallbackServerContext* context, const v1::StoreSetRequest* request,
    v1::StoreSetResponse* response) {
  return rpc::HandleUnary(context, auth_, [&] {
    return manager_->Set(request->key(), request->value());
  });
}

grpc::ServerUnaryReactor* StoreService::Get(
    grpc::CallbackServerContext* context, const v1::StoreGetRequest* request,
    v1::StoreGetResponse* response) {
  return rpc::ParkUnary(context, auth_, [&](auto finish) {
    manager_->Get(
        request->key(), WaitDeadline(*context),
        [response, finish](absl::StatusOr<std::string> value) {
          if (value.ok()) response->set_value(*std::move(value));
          finish(value.status());
        },
        Abandoned(context));
  });
}

grpc::ServerUnaryReactor* StoreService::Barrier(
    grpc::CallbackServerContext* context,
    const v1::StoreBarrierRequest* request,
    v1::StoreBarrierResponse* response) {
  return rpc::ParkUnary(context, auth_, [&](auto finish) {
    manager_->Barrier(request->name(), request->participants(), request->rank(),
                      WaitDeadline(*context), finish, Abandoned(context));
  });
}

}  // namespace cohort::coordinator
