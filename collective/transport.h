#pragma once

// Tagged point-to-point messages between the ranks of one group: what the
// collective algorithms are written against.
//
// Every message carries its collective's signature ("allreduce float32 sum
// 1000"). A rank that receives, at the same sequence number, a message whose
// signature differs from its own fails with FAILED_PRECONDITION naming both
// sides, instead of waiting for a message that will never come. Ranks whose
// different collectives exchange no message at that sequence (one in a
// Reduce to rank 0, the other in a Broadcast from it) cannot tell: their
// waits end at the deadline.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace cohort::collective {

// Names one message of one collective uniquely within a group.
struct Tag {
  uint64_t sequence = 0;  // the collective's number in the group's order
  uint32_t step = 0;      // the algorithm's step
  uint32_t chunk = 0;     // the piece of that step

  friend bool operator==(const Tag&, const Tag&) = default;
  friend auto operator<=>(const Tag&, const Tag&) = default;
};

// What a message says about the collective that sent it.
struct Envelope {
  Tag tag;
  absl::string_view signature;  // not owned; outlives the call
};

// Implementations are thread-safe: Send/Recv to different peers may run
// concurrently, and Abort may be called from any thread at any time.
class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "rank 1 (127.0.0.1:4001)": how errors name a peer.
  virtual std::string Describe(int rank) const = 0;

  // Sends `bytes` to `peer`. Returns once the data may be reused. Within
  // send_window_bytes() it does not wait for the peer's matching Recv: ring
  // algorithms send before they receive, on every rank at once.
  virtual absl::Status Send(int peer, const Envelope& envelope,
                            const void* data, size_t bytes,
                            absl::Time deadline) = 0;
  // As Send, but the transport may go on reading `data` after it returns,
  // until ReclaimLent returns: a large payload then goes out without a copy.
  // The caller keeps `data` alive and unchanged until then. By default, Send.
  virtual absl::Status SendLent(int peer, const Envelope& envelope,
                                const void* data, size_t bytes,
                                absl::Time deadline) {
    return Send(peer, envelope, data, bytes, deadline);
  }
  // Waits until the transport reads no buffer lent to SendLent any more.
  // Where that takes past `deadline` (a peer that stopped reading, or one
  // behind a cut link), the transport breaks its links to the peers still
  // holding lent bytes, fails waits on them, and returns DEADLINE_EXCEEDED
  // naming them; the caller then aborts the group. Either way nothing lent
  // is read after it returns.
  virtual absl::Status ReclaimLent(absl::Time deadline) {
    return absl::OkStatus();
  }
  // Receives the message with `envelope.tag` from `peer` into `data`, which
  // holds exactly `bytes`. Fails with DEADLINE_EXCEEDED, with the abort
  // status, with UNAVAILABLE when the peer is gone, or with
  // FAILED_PRECONDITION on a signature or size mismatch.
  virtual absl::Status Recv(int peer, const Envelope& envelope, void* data,
                            size_t bytes, absl::Time deadline) = 0;
  // As Recv, but returns the bytes as they arrived, without copying them
  // where the transport can: a reduction reads them once, in place. By
  // default, Recv into a buffer of its own.
  virtual absl::StatusOr<absl::Cord> RecvCord(int peer,
                                              const Envelope& envelope,
                                              size_t bytes,
                                              absl::Time deadline);

  // How far, in bytes, a rank may send ahead of its receives from the same
  // exchange without Send having to wait for the peer. Algorithms that send
  // before they receive stay within it.
  virtual size_t send_window_bytes() const {
    return std::numeric_limits<size_t>::max();
  }
  // The smallest chunk algorithms cut a transfer into. A transport that
  // frames each message sets it so that its framing stays small beside a
  // chunk, and its window, counted in payload bytes, holds the framing too.
  // The same on every rank of a group, as chunking must be.
  virtual size_t min_chunk_bytes() const { return 1; }

  // Whether all-reduce should exchange with every peer directly rather than
  // pass data round the ring: where every message crosses a socket, 2 steps
  // instead of 2(n - 1) save round trips and wake-ups, and messages that
  // wait on nothing but their arrival share few cores better. False where
  // some ring links are faster than other pairs (shared memory), and
  // in-process. The same on every rank of a group, since every rank must
  // choose the same algorithm.
  virtual bool favours_exchanges() const { return false; }

  // Fails pending and later Send/Recv on every rank of the group with
  // `status`. Idempotent: the first status wins.
  virtual void Abort(const absl::Status& status) = 0;
};

// The error for a collective mismatch between this rank and `peer`.
absl::Status SignatureMismatch(const Transport& transport, int peer,
                               const Tag& tag, absl::string_view ours,
                               absl::string_view theirs);

}  // namespace cohort::collective
