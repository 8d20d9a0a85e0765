#pragma once

// The messages that have arrived for one rank, by source and tag, and the
// waiting for them. Shared by every Transport: where bytes come from differs
// (a thread's Send, a gRPC stream), how they are matched does not.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/synchronization/mutex.h"
#include "collective/transport.h"

namespace cohort::collective {

// Thread-safe.
class Mailbox {
 public:
  explicit Mailbox(int size);

  // Makes progress on a waiting thread (a transport's completion loop):
  // runs until `done()` or `deadline` and returns true, or returns false
  // when it no longer can (its queue has shut down), and the wait then
  // blocks as without it.
  using Driver =
      std::function<bool(absl::FunctionRef<bool()> done, absl::Time deadline)>;
  // Before the first Take.
  void set_driver(Driver driver) { driver_ = std::move(driver); }

  // Files a message from `source`. A second message for a tag already held
  // is dropped, and fails later Takes from `source` with DATA_LOSS (only a
  // misbehaving peer sends one twice). The payload is a Cord so that bytes
  // received into a transport's own buffers are filed without a copy.
  void Deliver(int source, const Tag& tag, std::string signature,
               absl::Cord payload);

  // Waits for the message from `source` with `envelope.tag` and copies it to
  // `data` (exactly `bytes`). `self` names the ranks in errors. Fails with
  // the abort status, with `source`'s gone status, DEADLINE_EXCEEDED, or
  // FAILED_PRECONDITION on a signature or size mismatch.
  absl::Status Take(const Transport& self, int source, const Envelope& envelope,
                    void* data, size_t bytes, absl::Time deadline);
  // As Take, but hands over the payload itself instead of copying it.
  absl::StatusOr<absl::Cord> TakeCord(const Transport& self, int source,
                                      const Envelope& envelope, size_t bytes,
                                      absl::Time deadline);

  // Fails pending and later Takes from `source` (its process died, its
  // stream broke). The first status for a source wins.
  void PeerGone(int source, const absl::Status& status);
  // Fails pending and later Takes from every source. The first status wins;
  // returns whether it was this one.
  bool Abort(const absl::Status& status);
  absl::Status abort_status() const;
  // The abort status, else `source`'s gone status, else OK: whether waits
  // on `source` should end.
  absl::Status SourceStatus(int source) const;
  // Takes waiting for a message that has not arrived.
  int waiting() const;

 private:
  struct Message {
    std::string signature;
    absl::Cord payload;
  };
  struct Source {
    std::map<Tag, Message> messages;
    absl::Status gone;
  };

  // Waits until `condition` holds, or the source or the mailbox fails.
  template <typename Condition>
  absl::Status Await(const Transport& self, int source,
                     const Envelope& envelope, absl::Time deadline,
                     Condition condition) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<Source> sources_ ABSL_GUARDED_BY(mu_);
  absl::Status abort_ ABSL_GUARDED_BY(mu_);
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
  Driver driver_;
};

}  // namespace cohort::collective
