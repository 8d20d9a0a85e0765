#pragma once

// What one collective operation's algorithm works with: the transport, the
// operation's sequence number and signature, and its deadline.

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "collective/transport.h"

namespace cohort::collective {

// Valid for one operation. Not thread-safe.
struct OpContext {
  Transport* transport;  // not owned
  uint64_t sequence = 0;
  std::string signature;
  absl::Time deadline;
  size_t chunk_bytes = 1 << 20;

  int rank() const { return transport->rank(); }
  int size() const { return transport->size(); }
  int next() const { return (rank() + 1) % size(); }
  int prev() const { return (rank() + size() - 1) % size(); }

  absl::Status Send(int peer, uint32_t step, uint32_t chunk, const void* data,
                    size_t bytes) const {
    return transport->Send(peer, {{sequence, step, chunk}, signature}, data,
                           bytes, deadline);
  }
  absl::Status SendLent(int peer, uint32_t step, uint32_t chunk,
                        const void* data, size_t bytes) const {
    return transport->SendLent(peer, {{sequence, step, chunk}, signature},
                               data, bytes, deadline);
  }
  absl::Status Recv(int peer, uint32_t step, uint32_t chunk, void* data,
                    size_t bytes) const {
    return transport->Recv(peer, {{sequence, step, chunk}, signature}, data,
                           bytes, deadline);
  }
  absl::StatusOr<absl::Cord> RecvCord(int peer, uint32_t step, uint32_t chunk,
                                      size_t bytes) const {
    return transport->RecvCord(peer, {{sequence, step, chunk}, signature},
                               bytes, deadline);
  }
};

// How a buffer of `count` elements is cut into `parts` contiguous segments:
// the first count % parts segments have one element more.
struct Segments {
  Segments(size_t count, int parts);
  size_t offset(int i) const;  // in elements
  size_t length(int i) const;  // in elements

 private:
  size_t base_, extra_;
};

}  // namespace cohort::collective
