#include "collective/grpc_store.h"

#include "collective/types.h"
#include "common/status_macros.h"
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
  return absl::DeadlineExceededError(absl::StrCat(
      status.message(), " (no answer from the store within ",
      absl::FormatDuration(timeout), " while waiting for ", waited_for, ")"));
}

}  // namespace

// A call cancelled by Abort fails with Abort's reason, not gRPC's CANCELLED.
absl::Status GrpcStore::Aborted(absl::Status status) {
  if (status.ok() || !absl::IsCancelled(status)) return status;
  absl::MutexLock lock(&mu_);
  return aborted_.ok() ? status : aborted_;
}

GrpcStore::GrpcStore(std::string address, rpc::Security security)
    : connection_(std::move(address), std::move(security)),
      stub_(v1::Store::NewStub(connection_.channel())) {}

void GrpcStore::Abort(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (aborted_.ok()) aborted_ = AbortStatus(status);
  for (grpc::ClientContext* context : calls_) context->TryCancel();
}

absl::Status GrpcStore::aborted() const {
  absl::MutexLock lock(&mu_);
  return aborted_;
}

absl::Status GrpcStore::Begin(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  if (!aborted_.ok()) return aborted_;
  calls_.insert(context);
  return absl::OkStatus();
}

void GrpcStore::End(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  calls_.erase(context);
}

absl::Status GrpcStore::Set(const std::string& key, const std::string& value) {
  v1::StoreSetRequest request;
  request.set_key(key);
  request.set_value(value);
  v1::StoreSetResponse response;
  auto context = connection_.NewContext(kSetTimeout);
  COHORT_RETURN_IF_ERROR(Begin(context.get()));
  const grpc::Status status = stub_->Set(context.get(), request, &response);
  End(context.get());
  return Aborted(
      connection_.Annotate(absl::StrCat("Store.Set of \"", key, "\""), status));
}

absl::StatusOr<std::string> GrpcStore::Get(const std::string& key,
                                           absl::Duration timeout) {
  v1::StoreGetRequest request;
  request.set_key(key);
  v1::StoreGetResponse response;
  auto context = connection_.NewContext(timeout + rpc::kStoreReplyGrace);
  // Wait for the coordinator to come up rather than failing at once.
  context->set_wait_for_ready(true);
  COHORT_RETURN_IF_ERROR(Begin(context.get()));
  const grpc::Status answer = stub_->Get(context.get(), request, &response);
  End(context.get());
  absl::Status status = Aborted(connection_.Annotate("Store.Get", answer));
  if (!status.ok()) {
    return NoAnswer(status, *context, absl::StrCat("key \"", key, "\""),
                    timeout);
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
  COHORT_RETURN_IF_ERROR(Begin(context.get()));
  const grpc::Status answer = stub_->Barrier(context.get(), request, &response);
  End(context.get());
  return NoAnswer(Aborted(connection_.Annotate("Store.Barrier", answer)),
                  *context, absl::StrCat("barrier \"", name, "\""), timeout);
}

}  // namespace cohort::collective
