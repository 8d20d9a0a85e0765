#pragma once

// Ranks as threads of one process: the CPU replicas inside one agent, and
// the unit tests of the algorithms. Send copies into the receiver's mailbox,
// so it never waits for the receiver.

#include <memory>
#include <vector>

#include "collective/mailbox.h"
#include "collective/transport.h"

namespace cohort::collective {

// The shared state of one group of LocalTransports: one mailbox per rank.
// Create one hub per group, then one transport per rank. Thread-safe.
class LocalHub {
 public:
  explicit LocalHub(int size);

  int size() const { return static_cast<int>(mailboxes_.size()); }

  // The transport of `rank`; the hub must outlive it.
  std::unique_ptr<Transport> Connect(int rank);

  // Receives `rank` is waiting in, for a message not yet sent.
  int waiting(int rank) const { return mailboxes_[rank]->waiting(); }

 private:
  friend class LocalTransport;
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;  // by receiving rank
};

}  // namespace cohort::collective
