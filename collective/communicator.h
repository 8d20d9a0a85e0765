#pragma once

// The collective operations one rank of a group performs, as
// tf.distribute's cross-replica ops: all-reduce, reduce (to one rank),
// broadcast, all-gather, reduce-scatter and barrier. Every rank must call the
// same collectives in the same order; a mismatch fails with
// FAILED_PRECONDITION, never a hang.
//
// Every operation has a deadline. Abort(status) fails pending and later
// operations with that status, on every rank. A communicator whose operation
// failed stays failed: the group re-forms under a new communicator.

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "collective/types.h"

namespace cohort::collective {

struct CommunicatorOptions {
  absl::Duration timeout = absl::Seconds(60);  // per operation
  // The pipelining unit of large transfers, within the transport's bounds
  // (Transport::min_chunk_bytes, half its send window). The same on every
  // rank of a group.
  size_t chunk_bytes = 1 << 20;
};

// One rank's end of a group. Operations are called from one thread at a
// time; Abort may be called from any thread.
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: `data` holds `count` elements on every rank, and afterwards
  // their element-wise reduction (the same bits on every rank).
  virtual absl::Status AllReduce(void* data, size_t count, DType dtype,
                                 ReduceOp op) = 0;
  // `root`'s `data` receives the element-wise reduction of every rank's
  // `count` elements; the other ranks' data stays as it was.
  virtual absl::Status Reduce(void* data, size_t count, DType dtype,
                              ReduceOp op, int root) = 0;
  // `root`'s `count` elements are copied into `data` on every rank.
  virtual absl::Status Broadcast(void* data, size_t count, DType dtype,
                                 int root) = 0;
  // `input` has `count` elements; `output` has size()*count, rank r's block
  // at offset r*count.
  virtual absl::Status AllGather(const void* input, void* output, size_t count,
                                 DType dtype) = 0;
  // `input` has size()*count elements; `output` receives block rank() of
  // their reduction (`count` elements).
  virtual absl::Status ReduceScatter(const void* input, void* output,
                                     size_t count, DType dtype,
                                     ReduceOp op) = 0;
  // Returns once every rank has entered the barrier.
  virtual absl::Status Barrier() = 0;

  virtual void Abort(const absl::Status& status) = 0;

  // For traces: how this rank's part of `op` ("allreduce", "allgather",
  // "reduce_scatter", "broadcast", "reduce", "barrier") over `bytes`
  // travels, e.g. "ring: ranks 3 -> 4 -> 5" or "direct: all 8 ranks".
  // Empty where the communicator does not choose its own algorithms. Called
  // by the thread that runs the operations.
  virtual std::string Route(std::string_view op, size_t bytes) const {
    return {};
  }
};

}  // namespace cohort::collective
