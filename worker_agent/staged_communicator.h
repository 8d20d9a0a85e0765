#pragma once

// Host-memory collectives for a replica on a CUDA device: each operation
// copies the device buffers into host staging memory, runs the wrapped
// communicator there and copies the result back. This is what makes the
// intra-node choices that reduce on the host (hierarchical copy, reduction
// to one device) and the gRPC ring valid on GPUs, at the cost of two copies
// over PCIe per operation; NCCL needs none.

#include <memory>
#include <vector>

#include "collective/communicator.h"
#include "worker_agent/device_memory.h"

namespace cohort::agent {

// Owns the wrapped communicator. Operations from the replica's thread only;
// Abort from any.
class StagedCommunicator final : public collective::Communicator {
 public:
  StagedCommunicator(std::unique_ptr<collective::Communicator> host,
                     Device device);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }

  absl::Status AllReduce(void* data, size_t count, DType dtype,
                         collective::ReduceOp op) override;
  absl::Status Reduce(void* data, size_t count, DType dtype,
                      collective::ReduceOp op, int root) override;
  absl::Status Broadcast(void* data, size_t count, DType dtype,
                         int root) override;
  absl::Status AllGather(const void* input, void* output, size_t count,
                         DType dtype) override;
  absl::Status ReduceScatter(const void* input, void* output, size_t count,
                             DType dtype, collective::ReduceOp op) override;
  absl::Status Barrier() override { return host_->Barrier(); }
  void Abort(const absl::Status& status) override { host_->Abort(status); }
  std::string Route(std::string_view op, size_t bytes) const override {
    return host_->Route(op, bytes);
  }

 private:
  // Runs `op` on a host copy of `data` (`bytes`), then copies it back.
  template <typename Op>
  absl::Status InPlace(void* data, size_t bytes, Op op);

  const std::unique_ptr<collective::Communicator> host_;
  const Device device_;
  std::vector<char> in_, out_;  // staging, reused between operations
};

}  // namespace cohort::agent
