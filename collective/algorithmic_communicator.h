#pragma once

// A Communicator built from point-to-point algorithms (ring,
// direct, one-shot, chain, dissemination) over any Transport:
// threads of one process, or rank processes over gRPC.

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "collective/communicator.h"
#include "collective/transport.h"

namespace cohort::collective {

// Owns its transport. Operations from one thread at a time; Abort from any.
class AlgorithmicCommunicator final : public Communicator {
 public:
  AlgorithmicCommunicator(std::unique_ptr<Transport> transport,
                          CommunicatorOptions options = {});

  int rank() const override { return transport_->rank(); }
  int size() const override { return transport_->size(); }

  absl::Status AllReduce(void* data, size_t count, DType dtype,
                         ReduceOp op) override;
  absl::Status Broadcast(void* data, size_t count, DType dtype,
                         int root) override;
  absl::Status Reduce(void* data, size_t count, DType dtype, ReduceOp op,
                      int root) override;
  absl::Status AllGather(const void* input, void* output, size_t count,
                         DType dtype) override;
  absl::Status ReduceScatter(const void* input, void* output, size_t count,
                             DType dtype, ReduceOp op) override;
  absl::Status Barrier() override;
  void Abort(const absl::Status& status) override;
  std::string Route(std::string_view op, size_t bytes) const override;

 private:
  // Runs one operation: refuses once failed, numbers it, and on failure
  // aborts the group so that no other rank waits for this one.
  template <typename Algorithm>
  absl::Status Run(std::string signature, Algorithm&& algorithm);

  const std::unique_ptr<Transport> transport_;
  const CommunicatorOptions options_;
  uint64_t next_sequence_ = 0;  // touched by the operation thread only

  absl::Mutex mu_;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::collective
