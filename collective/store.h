#pragma once

// Where the ranks of a group rendezvous: publish and read small values (peer
// addresses, the NCCL unique id) and meet at barriers. Every call has a
// deadline.

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace cohort::collective {

// Implementations are thread-safe.
class Store {
 public:
  virtual ~Store() = default;

  virtual absl::Status Set(const std::string& key,
                           const std::string& value) = 0;
  // Waits until `key` is set; DEADLINE_EXCEEDED naming it after `timeout`.
  virtual absl::StatusOr<std::string> Get(const std::string& key,
                                          absl::Duration timeout) = 0;
  // Returns once `participants` ranks have called Barrier(name, ...).
  virtual absl::Status Barrier(const std::string& name, int participants,
                               int rank, absl::Duration timeout) = 0;
  // Why the group being formed through this store was given up (its job's
  // attempt ended), or OK: waits beside the store's calls, for connections
  // to peers, end on it too.
  virtual absl::Status aborted() const { return absl::OkStatus(); }
};

}  // namespace cohort::collective
