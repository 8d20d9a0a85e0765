#pragma once

// The meeting point of one agent's replicas under CentralStorage
// (tf.distribute.experimental.CentralStorageStrategy): the job's ON_WRITE
// variables and optimizer slots exist once, and every local replica reads
// that one copy.
//
// Local replica 0 allocates each shared buffer (host memory for CPU devices,
// device memory on a single GPU, mapped host memory over several: see
// DeviceBuffer::AllocateShared) and publishes it here, in creation order;
// the other replicas take the buffer with the same index, since every
// replica creates its variables in the same order. Around each
// update a barrier of the local replicas keeps readers and the one writer
// apart: nobody still reads the old values when replica 0 writes, and nobody
// reads before it has finished.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort::agent {

// A buffer that local replica 0 owns and shares. `data` is not owned here.
struct SharedBuffer {
  std::string name;  // the variable's (or slot's) name, to catch mismatches
  void* data = nullptr;
  size_t bytes = 0;
};

// Thread-safe. Every wait has a deadline, and Abort ends the waits.
class CentralStorage {
 public:
  explicit CentralStorage(int local_replicas);

  // Local replica 0: shares its next buffer. Its owner outlives every use by
  // the other replicas (the runner destroys all replicas together).
  void Publish(SharedBuffer buffer);
  // Another local replica: buffer number `index` in publication order, once
  // replica 0 has published it; DEADLINE_EXCEEDED or the abort status
  // otherwise.
  absl::StatusOr<SharedBuffer> Await(size_t index, absl::Time deadline);
  // Returns once every local replica has called it (one round per call),
  // or DEADLINE_EXCEEDED, or the abort status.
  absl::Status Barrier(absl::Time deadline);
  // Ends every wait, pending and later, with `status`. The first one stays.
  void Abort(const absl::Status& status);

 private:
  const int parties_;
  absl::Mutex mu_;
  std::vector<SharedBuffer> published_ ABSL_GUARDED_BY(mu_);
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;     // in the current round
  int64_t rounds_ ABSL_GUARDED_BY(mu_) = 0;  // completed barrier rounds
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::agent
