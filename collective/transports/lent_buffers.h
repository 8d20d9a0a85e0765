#pragma once

// Buffers handed to gRPC by reference instead of by copy, and the wait for
// gRPC to let go of them. GrpcTransport keeps one per peer stream, so that
// it can tell which peer still holds lent bytes.

#include <grpcpp/support/slice.h>

#include <cstddef>
#include <memory>

#include "absl/time/time.h"

namespace cohort::collective {

// Thread-safe. gRPC may release a lent slice on any of its threads, even
// after this object is gone: the count lives in state the slices share.
class LentBuffers {
 public:
  LentBuffers();

  // A slice that references `data`, counted until gRPC releases it. The
  // caller keeps `data` alive and unchanged until AwaitReleased says that
  // every such slice is released.
  grpc::Slice Lend(const void* data, size_t bytes);
  // Waits until every slice Lend made is released, or `deadline`. Returns
  // whether they all are.
  bool AwaitReleased(absl::Time deadline) const;
  // Slices lent and not yet released.
  size_t outstanding() const;

 private:
  struct State;
  // gRPC's destroy callback for a lent slice.
  static void Release(void* user_data);

  std::shared_ptr<State> state_;
};

}  // namespace cohort::collective
