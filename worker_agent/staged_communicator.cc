#include "worker_agent/staged_communicator.h"

#include "common/status_macros.h"

namespace cohort::agent {

StagedCommunicator::StagedCommunicator(
    std::unique_ptr<collective::Communicator> host, Device device)
    : host_(std::move(host)), device_(device) {}

template <typename Op>
absl::Status StagedCommunicator::InPlace(void* data, size_t bytes, Op op) {
  in_.resize(bytes);
  COHORT_RETURN_IF_ERROR(CopyToHost(device_, in_.data(), data, bytes));
  COHORT_RETURN_IF_ERROR(op(in_.data()));
  return CopyToDevice(device_, data, in_.data(), bytes);
}

absl::Status StagedCommunicator::AllReduce(void* data, size_t count,
                                           DType dtype,
                                           collective::ReduceOp op) {
  return InPlace(data, count * DTypeSize(dtype), [&](void* host) {
    return host_->AllReduce(host, count, dtype, op);
  });
}

absl::Status StagedCommunicator::Reduce(void* data, size_t count, DType dtype,
                                        collective::ReduceOp op, int root) {
  return InPlace(data, count * DTypeSize(dtype), [&](void* host) {
    return host_->Reduce(host, count, dtype, op, root);
  });
}

absl::Status StagedCommunicator::Broadcast(void* data, size_t count,
                                           DType dtype, int root) {
  return InPlace(data, count * DTypeSize(dtype), [&](void* host) {
    return host_->Broadcast(host, count, dtype, root);
  });
}

absl::Status StagedCommunicator::AllGather(const void* input, void* output,
                                           size_t count, DType dtype) {
  const size_t bytes = count * DTypeSize(dtype);
  in_.resize(bytes);
  out_.resize(bytes * static_cast<size_t>(size()));
  COHORT_RETURN_IF_ERROR(CopyToHost(device_, in_.data(), input, bytes));
  COHORT_RETURN_IF_ERROR(
      host_->AllGather(in_.data(), out_.data(), count, dtype));
  return CopyToDevice(device_, output, out_.data(), out_.size());
}

absl::Status StagedCommunicator::ReduceScatter(const void* input, void* output,
                                               size_t count, DType dtype,
                                               collective::ReduceOp op) {
  const size_t bytes = count * DTypeSize(dtype);
  in_.resize(bytes * static_cast<size_t>(size()));
  out_.resize(bytes);
  COHORT_RETURN_IF_ERROR(CopyToHost(device_, in_.data(), input, in_.size()));
  COHORT_RETURN_IF_ERROR(
      host_->ReduceScatter(in_.data(), out_.data(), count, dtype, op));
  return CopyToDevice(device_, output, out_.data(), bytes);
}

}  // namespace cohort::agent
