#pragma once

// A Communicator over NCCL, for ranks that each own one CUDA device. Data
// pointers are device memory; operations run on the communicator's stream
// and are waited for with the deadline: a hung NCCL kernel ends in
// ncclCommAbort and DEADLINE_EXCEEDED, not in a hang. Ranks bootstrap by
// rank 0 publishing the NCCL unique id in the group's Store.
//
// Built only with NCCL (COHORT_HAVE_NCCL).

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "collective/communicator.h"
#include "collective/store.h"

namespace cohort::collective {

struct NcclOptions {
  std::string group;  // unique per group and epoch
  int rank = 0;
  int size = 1;
  int device = 0;  // the CUDA ordinal this rank uses
  CommunicatorOptions communicator;
};

// Operations from one thread at a time; Abort from any thread.
class NcclCommunicator final : public Communicator {
 public:
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      const NcclOptions& options, Store& store);
  ~NcclCommunicator() override;

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }

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
  std::string Route(std::string_view, size_t) const override {
    return absl::StrCat("nccl: all ", size(), " ranks");
  }

 private:
  explicit NcclCommunicator(NcclOptions options)
      : options_(std::move(options)) {}
  absl::Status Init(Store& store);
  // Launches one NCCL call and waits for it within the deadline.
  template <typename Launch>
  absl::Status Run(const char* what, Launch launch);
  // Polls until the communicator is no longer in progress, `deadline`, or
  // (while forming the group) `store` is aborted.
  absl::Status WaitForComm(absl::Time deadline, const Store* store = nullptr);

  // Polls the communicator's state; once it was aborted, AbortReason().
  absl::Status AsyncState(ncclResult_t* state);
  // What Abort was given, for the operations it cut short.
  absl::Status AbortReason() ABSL_LOCKS_EXCLUDED(mu_);

  const NcclOptions options_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* barrier_scratch_ = nullptr;  // one int on the device

  absl::Mutex mu_;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  // Held across each NCCL call on comm_ once it exists: ncclCommAbort frees
  // the communicator, and an Abort from another thread must not do so under
  // the operation thread's poll. Set under it, aborted_ says comm_ is gone.
  // The calls made under it return at once: the communicator is
  // non-blocking (an enqueue answers ncclInProgress rather than wait).
  absl::Mutex comm_mu_;
  std::atomic<bool> aborted_{false};
};

}  // namespace cohort::collective
