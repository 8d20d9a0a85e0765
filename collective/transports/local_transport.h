#pragma once

// Ranks as threads of one process: the CPU replicas inside one agent, and
// the unit tests of the algorithms. Messages are copied into the receiver's
// mailbox, so Send never waits for the receiver.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "collective/transport.h"

namespace cohort::collective {

// The shared state of one group of LocalTransports. Create one hub per
// group, then one transport per rank. Thread-safe.
class LocalHub {
 public:
  explicit LocalHub(int size);

  int size() const { return size_; }

  // One transport per rank; the hub must outlive them.
  std::unique_ptr<Transport> Connect(int rank);

 private:
  friend class LocalTransport;

  struct Message {
    std::string signature;
    std::vector<char> payload;
  };
  // Messages from `src` to `dst`, by tag.
  using Mailbox = std::map<Tag, Message>;

  Mailbox& mailbox(int src, int dst) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return mailboxes_[static_cast<size_t>(src * size_ + dst)];
  }

  const int size_;
  absl::Mutex mu_;
  std::vector<Mailbox> mailboxes_ ABSL_GUARDED_BY(mu_);
  absl::Status abort_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::collective
