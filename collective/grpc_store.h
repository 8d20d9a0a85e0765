#pragma once

// The Store served by the coordinator (cohort.v1.Store), over gRPC.

#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cohort/v1/store.grpc.pb.h"
#include "collective/store.h"
#include "rpc/channel.h"

namespace cohort::collective {

// Thread-safe.
class GrpcStore final : public Store {
 public:
  GrpcStore(std::string address, rpc::Security security);

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  absl::Duration timeout) override;
  absl::Status Barrier(const std::string& name, int participants, int rank,
                       absl::Duration timeout) override;

  // Ends the calls under way, and fails later ones at once, with `status`:
  // a replica waiting for a peer that will never come (its job's attempt
  // was ended) stops waiting.
  void Abort(const absl::Status& status);
  absl::Status aborted() const override;

 private:
  // Registers a call's context for Abort; an error when aborted already.
  absl::Status Begin(grpc::ClientContext* context);
  void End(grpc::ClientContext* context);
  absl::Status Aborted(absl::Status status);

  rpc::Connection connection_;
  std::unique_ptr<v1::Store::Stub> stub_;
  mutable absl::Mutex mu_;
  std::set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::collective
