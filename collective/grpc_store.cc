#include "collective/grpc_store.h"

#include "rpc/limits.h"

namespace cohort::collective {
namespace {

const absl::Duration kSetTimeout =
    absl::Milliseconds(rpc::kDefaultRpcTimeoutMs);

// The store answers a wait that runs out itself, naming what was missing.
// When the call's own deadline passed instead, the store never answered
// (it was unreachable): say what the wait was for.
absl::Status NoAnswer(absl::Status status, const grpc::ClientContext& context,
                      absl::string_view waited_for, absl::Duration timeout) {
  if (!absl::IsDeadlineExceeded(status) ||
      absl::Now() < absl::FromChrono(context.deadline())) {
    return status;
  }
  return absl::DeadlineExceededError(
      absl::StrCat(status.message(), " (no answer from the store within ",
                   absl::FormatDuration(timeout), " while waiting for ",
                   waited_for, ")"));
}

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
  auto context = connection_.NewContext(timeout + rpc::kStoreReplyGrace);
  // Wait for the coordinator to come up rather than failing at once.
  context->set_wait_for_ready(true);
  absl::Status status = connection_.Annotate(
      "Store.Get", stub_->Get(context.get(), request, &response));
  if (!status.ok()) {
    return NoAnswer(status, *context, absl::StrCat("key \"", key, "\""), timeout);
  }
  return std::move(*response.mutable_value());
}

absl::Status GrpcStore::Barrier(const std::string& name, int participants,
                                int rank, absl::Duration timeout) {
  v1::StoreBarrierRequest request;
  request.set_name(name);
  request.set_participants(participants);
  request.set_rank(rank);
  v1::StoreBarrierResponse response;
  auto context = connection_.NewContext(timeout + rpc::kStoreReplyGrace);
  context->set_wait_for_ready(true);
  return NoAnswer(
      connection_.Annotate("Store.Barrier",
                           stub_->Barrier(context.get(), request, &response)),
      *context, absl::StrCat("barrier \"", name, "\""), timeout);
}

}  // namespace cohort::collective
