#pragma once

// gRPC adapter of the rendezvous store (cohort.v1.Store). Waiting calls are
// parked in the StoreManager and finished from its callbacks: no thread
// blocks while a rank waits for a key or a barrier.

#include "absl/time/time.h"
#include "cohort/v1/store.grpc.pb.h"
#include "coordinator/store_manager.h"
#include "rpc/auth.h"

namespace cohort::coordinator {

// `manager` and `auth` are not owned and must outlive the service.
// Thread-safe.
class StoreService final : public v1::Store::CallbackService {
 public:
  StoreService(StoreManager* manager, const rpc::Authenticator* auth);

  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* context,
                                const v1::StoreSetRequest* request,
                                v1::StoreSetResponse* response) override;
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context,
                                const v1::StoreGetRequest* request,
                                v1::StoreGetResponse* response) override;
  grpc::ServerUnaryReactor* Barrier(
      grpc::CallbackServerContext* context,
      const v1::StoreBarrierRequest* request,
      v1::StoreBarrierResponse* response) override;

 private:
  StoreManager* const manager_;
  const rpc::Authenticator* const auth_;
};

}  // namespace cohort::coordinator
