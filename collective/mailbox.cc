#include "collective/mailbox.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace cohort::collective {

Mailbox::Mailbox(int size) : sources_(static_cast<size_t>(size)) {}

void Mailbox::Deliver(int source, const Tag& tag, std::string signature,
                      absl::Cord payload) {
  absl::MutexLock lock(&mu_);
  Source& from = sources_[source];
  const bool filed =
      from.messages
          .try_emplace(tag, Message{std::move(signature), std::move(payload)})
          .second;
  if (filed || !from.gone.ok()) return;
  // Every tag is sent once: a second message for one is not a retry but a
  // peer that cannot be trusted (two processes claiming one rank, say).
  from.gone = absl::DataLossError(
      absl::StrCat("rank ", source, " sent a second message for sequence ",
                   tag.sequence, ", step ", tag.step, ", chunk ", tag.chunk,
                   "; nothing more from it is trusted"));
}

template <typename Condition>
absl::Status Mailbox::Await(const Transport& self, int source,
                            const Envelope& envelope, absl::Time deadline,
                            Condition condition) {
  Source& from = sources_[source];
  // Messages already here are still delivered after the source is gone.
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !abort_.ok() || condition() || !from.gone.ok();
  };
  ++waiting_;
  bool met = done();
  // The driver runs the completions that file messages, so the one awaited
  // is read off its socket on this thread.
  if (driver_ != nullptr) {
    while (!met && absl::Now() < deadline) {
      mu_.Unlock();
      const bool drove = driver_(
          [&] {
            absl::MutexLock lock(&mu_);
            return done();
          },
          deadline);
      mu_.Lock();
      met = done();
      if (!drove) break;
    }
  }
  if (!met) met = mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
  --waiting_;
  if (!abort_.ok()) return abort_;
  if (condition()) return absl::OkStatus();
  if (!from.gone.ok()) return from.gone;
  if (met) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("no message from ", self.Describe(source), " for ",
                   envelope.signature, " (sequence ", envelope.tag.sequence,
                   ", step ", envelope.tag.step, ") before the deadline"));
}

int Mailbox::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiting_;
}

absl::Status Mailbox::Take(const Transport& self, int source,
                           const Envelope& envelope, void* data, size_t bytes,
                           absl::Time deadline) {
  absl::StatusOr<absl::Cord> payload =
      TakeCord(self, source, envelope, bytes, deadline);
  if (!payload.ok()) return payload.status();
  char* out = static_cast<char*>(data);
  for (absl::string_view piece : payload->Chunks()) {
    std::memcpy(out, piece.data(), piece.size());
    out += piece.size();
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Cord> Mailbox::TakeCord(const Transport& self, int source,
                                             const Envelope& envelope,
                                             size_t bytes,
                                             absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto& messages = sources_[source].messages;
  const Tag& tag = envelope.tag;
  auto first_of_op = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return messages.lower_bound(Tag{tag.sequence, 0, 0});
  };
  // Any message of this collective from the source says whether both ranks
  // agree on what the collective is; check that before waiting for our tag.
  auto op_started = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const auto it = first_of_op();
    return it != messages.end() && it->first.sequence == tag.sequence;
  };
  absl::Status status = Await(self, source, envelope, deadline, op_started);
  if (!status.ok()) return status;
  if (first_of_op()->second.signature != envelope.signature) {
    return SignatureMismatch(self, source, tag, envelope.signature,
                             first_of_op()->second.signature);
  }
  auto arrived = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return messages.contains(tag);
  };
  status = Await(self, source, envelope, deadline, arrived);
  if (!status.ok()) return status;
  const auto it = messages.find(tag);
  if (it->second.payload.size() != bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat(self.Describe(source), " sent ", it->second.payload.size(),
                     " bytes for ", envelope.signature, " where ",
                     self.Describe(self.rank()), " expects ", bytes));
  }
  absl::Cord payload = std::move(it->second.payload);
  messages.erase(it);
  return payload;
}

void Mailbox::PeerGone(int source, const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (sources_[source].gone.ok()) sources_[source].gone = status;
}

bool Mailbox::Abort(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (!abort_.ok()) return false;
  abort_ = status;
  return true;
}

absl::Status Mailbox::SourceStatus(int source) const {
  absl::MutexLock lock(&mu_);
  if (!abort_.ok()) return abort_;
  return sources_[source].gone;
}

absl::Status Mailbox::abort_status() const {
  absl::MutexLock lock(&mu_);
  return abort_;
}

}  // namespace cohort::collective
