#pragma once

// A Transport that forwards every call to another, for tests that change
// one behaviour of a real transport (bounded links, the algorithm it
// favours) and keep the rest.

#include <memory>
#include <string>

#include "collective/transport.h"

namespace cohort::testing {

// Owns `inner`. Thread-safe as `inner` is.
class ForwardingTransport : public collective::Transport {
 public:
  explicit ForwardingTransport(std::unique_ptr<collective::Transport> inner)
      : inner_(std::move(inner)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string Describe(int rank) const override {
    return inner_->Describe(rank);
  }
  absl::Status Send(int peer, const collective::Envelope& envelope,
                    const void* data, size_t bytes,
                    absl::Time deadline) override {
    return inner_->Send(peer, envelope, data, bytes, deadline);
  }
  absl::Status SendLent(int peer, const collective::Envelope& envelope,
                        const void* data, size_t bytes,
                        absl::Time deadline) override {
    return inner_->SendLent(peer, envelope, data, bytes, deadline);
  }
  absl::Status ReclaimLent(absl::Time deadline) override {
    return inner_->ReclaimLent(deadline);
  }
  absl::Status Recv(int peer, const collective::Envelope& envelope, void* data,
                    size_t bytes, absl::Time deadline) override {
    return inner_->Recv(peer, envelope, data, bytes, deadline);
  }
  absl::StatusOr<absl::Cord> RecvCord(int peer,
                                      const collective::Envelope& envelope,
                                      size_t bytes,
                                      absl::Time deadline) override {
    return inner_->RecvCord(peer, envelope, bytes, deadline);
  }
  size_t send_window_bytes() const override {
    return inner_->send_window_bytes();
  }
  size_t min_chunk_bytes() const override { return inner_->min_chunk_bytes(); }
  bool favours_exchanges() const override {
    return inner_->favours_exchanges();
  }
  void Abort(const absl::Status& status) override { inner_->Abort(status); }

 private:
  const std::unique_ptr<collective::Transport> inner_;
};

// An in-process transport that favours exchanges, as one over sockets
// does: all-reduce over it takes the direct path among 3 to 16 ranks.
class ExchangingTransport final : public ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  bool favours_exchanges() const override { return true; }
};

}  // namespace cohort::testing
