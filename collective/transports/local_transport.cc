#include "collective/transports/local_transport.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace cohort::collective {

// One rank's view of a LocalHub. Thread-safe through the hub's mutex.
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
    LocalHub::Message message;
    message.signature = std::string(envelope.signature);
    message.payload.assign(static_cast<const char*>(data),
                           static_cast<const char*>(data) + bytes);
    absl::MutexLock lock(&hub_->mu_);
    if (!hub_->abort_.ok()) return hub_->abort_;
    hub_->mailbox(rank_, peer)
        .insert_or_assign(envelope.tag, std::move(message));
    return absl::OkStatus();
  }

  absl::Status Recv(int peer, const Envelope& envelope, void* data,
                    size_t bytes, absl::Time deadline) override {
    absl::MutexLock lock(&hub_->mu_);
    LocalHub::Mailbox& box = hub_->mailbox(peer, rank_);
    const Tag& tag = envelope.tag;
    auto first_of_op = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(hub_->mu_) {
      return box.lower_bound(Tag{tag.sequence, 0, 0});
    };
    // Any message of this collective from the peer says whether we agree on
    // what the collective is; check that before waiting for our tag.
    auto op_started = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(hub_->mu_) {
      const auto it = first_of_op();
      return it != box.end() && it->first.sequence == tag.sequence;
    };
    if (absl::Status s = Await(op_started, peer, envelope, deadline); !s.ok()) {
      return s;
    }
    if (first_of_op()->second.signature != envelope.signature) {
      return SignatureMismatch(*this, peer, tag, envelope.signature,
                               first_of_op()->second.signature);
    }
    auto arrived = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(hub_->mu_) {
      return box.contains(tag);
    };
    if (absl::Status s = Await(arrived, peer, envelope, deadline); !s.ok()) {
      return s;
    }
    const auto it = box.find(tag);
    if (it->second.payload.size() != bytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          Describe(peer), " sent ", it->second.payload.size(), " bytes for ",
          envelope.signature, " where ", Describe(rank_), " expects ", bytes));
    }
    if (bytes > 0) std::memcpy(data, it->second.payload.data(), bytes);
    box.erase(it);
    return absl::OkStatus();
  }

  void Abort(const absl::Status& status) override {
    absl::MutexLock lock(&hub_->mu_);
    if (hub_->abort_.ok()) {
      hub_->abort_ =
          absl::Status(status.code(),
                       absl::StrCat(Describe(rank_),
                                    " aborted the group: ", status.message()));
    }
  }

 private:
  // Waits until `condition` holds or the group is aborted; the abort status,
  // or DEADLINE_EXCEEDED naming what was awaited.
  template <typename Condition>
  absl::Status Await(Condition& condition, int peer, const Envelope& envelope,
                     absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(hub_->mu_) {
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(hub_->mu_) {
      return !hub_->abort_.ok() || condition();
    };
    const bool met =
        hub_->mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
    if (!hub_->abort_.ok()) return hub_->abort_;
    if (met) return absl::OkStatus();
    return absl::DeadlineExceededError(
        absl::StrCat("no message from ", Describe(peer), " for ",
                     envelope.signature, " (sequence ", envelope.tag.sequence,
                     ", step ", envelope.tag.step, ") before the deadline"));
  }

  LocalHub* const hub_;
  const int rank_;
};

LocalHub::LocalHub(int size)
    : size_(size), mailboxes_(static_cast<size_t>(size * size)) {}

std::unique_ptr<Transport> LocalHub::Connect(int rank) {
  return std::make_unique<LocalTransport>(this, rank);
}

}  // namespace cohort::collective
