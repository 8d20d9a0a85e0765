#include "collective/grpc_store.h"

#include "rpc/limits.h"

namespace cohort::collective {
namespace {

const absl::Duration kSetTimeout =
    absl::Milliseconds(rpc::kDefaultRpcTimeoutMs);

}  // namespace

GrpcStore::GrpcStore(std::string address, rpc::Security security)
    : connection_(std::move(address), std::move(security)),
      stub_(v1::Store::NewStub(connection_.channel())) {}

absl::Status GrpcStore::Set(const std::string& key, const std::string& value) {
  v1::StoreSetRequest request;
  request.set_key(key);
  request.set_value(value);
  v1::StoreSetResponse response;
  auto context = connection_.NewContext(kSetTimeout);
  return connection_.Annotate("Store.Set",
                              stub_->Set(context.get(), request, &response));
}

absl::StatusOr<std::string> GrpcStore::Get(const std::string& key,
                                           absl::Duration timeout) {
  v1::StoreGetRequest request;
  request.set_key(key);
  v1::StoreGetResponse response;
  auto context = connection_.NewContext(timeout);
  // Wait for the coordinator to come up rather than failing at once.
  context->set_wait_for_ready(true);
  absl::Status status = connection_.Annotate(
      "Store.Get", stub_->Get(context.get(), request, &response));
  if (!status.ok()) return status;
  return std::move(*response.mutable_value());
}

absl::Status GrpcStore::Barrier(const std::string& name, int participants,
                                int rank, absl::Duration timeout) {
  v1::StoreBarrierRequest request;
  request.set_name(name);
  request.set_participants(participants);
  request.set_rank(rank);
  v1::StoreBarrierResponse response;
  auto context = connection_.NewContext(timeout);
  context->set_wait_for_ready(true);
  return connection_.Annotate(
      "Store.Barrier", stub_->Barrier(context.get(), request, &response));
}

}  // namespace cohort::collective
