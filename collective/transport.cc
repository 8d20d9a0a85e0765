#include "collective/transport.h"

#include "absl/strings/str_format.h"

namespace cohort::collective {

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
