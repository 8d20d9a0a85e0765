#include "collective/transport.h"

#include <string>

#include "absl/strings/str_format.h"

namespace cohort::collective {

absl::StatusOr<absl::Cord> Transport::RecvCord(int peer,
                                               const Envelope& envelope,
                                               size_t bytes,
                                               absl::Time deadline) {
  std::string buffer(bytes, '\0');
  absl::Status status = Recv(peer, envelope, buffer.data(), bytes, deadline);
  if (!status.ok()) return status;
  return absl::Cord(std::move(buffer));
}

absl::Status SignatureMismatch(const Transport& transport, int peer,
                               const Tag& tag, absl::string_view ours,
                               absl::string_view theirs) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "collective mismatch at sequence %d: %s called %s, but %s called %s; "
      "every rank must issue the same collectives in the same order",
      tag.sequence, transport.Describe(transport.rank()), ours,
      transport.Describe(peer), theirs));
}

}  // namespace cohort::collective
