#include "collective/transports/local_transport.h"

#include "absl/strings/str_cat.h"
#include "collective/types.h"

namespace cohort::collective {

// One rank's view of a LocalHub. Thread-safe through the mailboxes.
class LocalTransport final : public Transport {
 public:
  LocalTransport(LocalHub* hub, int rank) : hub_(hub), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }
  std::string Describe(int rank) const override {
    return absl::StrCat("rank ", rank);
  }

  absl::Status Send(int peer, const Envelope& envelope, const void* data,
                    size_t bytes, absl::Time deadline) override {
    if (absl::Status aborted = own().abort_status(); !aborted.ok()) {
      return aborted;
    }
    hub_->mailboxes_[peer]->Deliver(
        rank_, envelope.tag, std::string(envelope.signature),
        absl::Cord(std::string(static_cast<const char*>(data), bytes)));
    return absl::OkStatus();
  }

  absl::Status Recv(int peer, const Envelope& envelope, void* data,
                    size_t bytes, absl::Time deadline) override {
    return own().Take(*this, peer, envelope, data, bytes, deadline);
  }

  absl::StatusOr<absl::Cord> RecvCord(int peer, const Envelope& envelope,
                                      size_t bytes,
                                      absl::Time deadline) override {
    return own().TakeCord(*this, peer, envelope, bytes, deadline);
  }

  // The whole group shares the abort, as peer processes learn of it.
  void Abort(const absl::Status& given) override {
    const absl::Status status = AbortStatus(given);
    const absl::Status named(
        status.code(), absl::StrCat(Describe(rank_),
                                    " aborted the group: ", status.message()));
    for (auto& mailbox : hub_->mailboxes_) mailbox->Abort(named);
  }

 private:
  Mailbox& own() { return *hub_->mailboxes_[rank_]; }

  LocalHub* const hub_;
  const int rank_;
};

LocalHub::LocalHub(int size) {
  for (int r = 0; r < size; ++r)
    mailboxes_.push_back(std::make_unique<Mailbox>(size));
}

std::unique_ptr<Transport> LocalHub::Connect(int rank) {
  return std::make_unique<LocalTransport>(this, rank);
}

}  // namespace cohort::collective
