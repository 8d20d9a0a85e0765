#pragma once

// A Communicator that times every operation of the one it wraps, for
// /metrics: cohort_collective_duration_seconds and
// cohort_collective_size_bytes, histograms by op and algorithm; and, on a
// thread that traces (common/trace.h), records each as a span with its
// bytes, algorithm, route (where `inner` gives one) and sequence number.

#include <memory>
#include <string>

#include "collective/communicator.h"

namespace cohort::collective {

// Owns `inner`. Same threading as the Communicator interface. Records into
// MetricRegistry::Default().
class MeteredCommunicator final : public Communicator {
 public:
  // `algorithm`: how `inner` moves data, e.g. "ring", "hierarchical",
  // "nccl".
  MeteredCommunicator(std::unique_ptr<Communicator> inner,
                      std::string algorithm);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }

  absl::Status AllReduce(void* data, size_t count, DType dtype,
                         ReduceOp op) override;
  absl::Status Reduce(void* data, size_t count, DType dtype, ReduceOp op,
                      int root) override;
  absl::Status Broadcast(void* data, size_t count, DType dtype,
                         int root) override;
  absl::Status AllGather(const void* input, void* output, size_t count,
                         DType dtype) override;
  absl::Status ReduceScatter(const void* input, void* output, size_t count,
                             DType dtype, ReduceOp op) override;
  absl::Status Barrier() override;
  void Abort(const absl::Status& status) override { inner_->Abort(status); }
  std::string Route(std::string_view op, size_t bytes) const override {
    return inner_->Route(op, bytes);
  }

 private:
  // Runs `op` and records its time and `bytes` (this rank's payload).
  template <typename Op>
  absl::Status Timed(const char* name, size_t bytes, Op&& op);

  const std::unique_ptr<Communicator> inner_;
  const std::string algorithm_;
  int64_t ops_ = 0;  // operations started, for the trace's `seq`
};

}  // namespace cohort::collective
