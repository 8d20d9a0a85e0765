#pragma once

// One direction of a same-host link: a single-producer, single-consumer
// byte ring in POSIX shared memory. Bytes are streamed through it, so a
// message may be larger than the ring; the writer waits for space and the
// reader for data, on futexes in the shared header.
//
// The receiver creates the ring and names it; the sender opens it; once
// both have it mapped the name is unlinked, so the memory goes with the
// last process. A process killed before then leaves the name behind, so a
// ring's name carries its creator (RingName), and RemoveStaleRings removes
// the names of creators that are gone.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace cohort::collective {

// Returns a non-OK status when a wait should end early (abort, peer gone).
using InterruptCheck = std::function<absl::Status()>;

// "/cohort-<pid namespace>-<pid>-<tag>": a name for a ring this process
// creates.
std::string RingName(absl::string_view tag);

// Unlinks every ring name in /dev/shm whose creator, in this process's pid
// namespace, has exited: nobody can still need it, as the creator would
// have unlinked it once its peer had it mapped. Returns how many.
int RemoveStaleRings();

// One end of a ring. Thread-compatible: one writer thread on the sending
// end and one reader thread on the receiving end.
class ShmChannel {
 public:
  // Creates and maps a ring of `capacity` bytes (memory reserved up front,
  // so a full /dev/shm is an error here, not a SIGBUS later).
  static absl::StatusOr<std::unique_ptr<ShmChannel>> Create(
      const std::string& name, size_t capacity);
  // Maps an existing ring.
  static absl::StatusOr<std::unique_ptr<ShmChannel>> Open(
      const std::string& name);
  ~ShmChannel();

  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;

  // Removes the name; the mapping stays. Idempotent.
  void Unlink();
  size_t capacity() const { return capacity_; }

  // Copies `bytes` in, waiting for space as needed.
  absl::Status Write(const void* data, size_t bytes, absl::Time deadline,
                     const InterruptCheck& interrupted);
  // Copies `bytes` out, waiting for data as needed.
  absl::Status Read(void* data, size_t bytes, absl::Time deadline,
                    const InterruptCheck& interrupted);

 private:
  struct Header;
  ShmChannel(std::string name, void* base, size_t mapped, bool owner);

  std::string name_;
  void* base_;
  size_t mapped_;
  bool linked_;
  Header* header_;
  char* ring_;
  size_t capacity_;
};

}  // namespace cohort::collective
