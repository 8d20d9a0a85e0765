#include "collective/nccl/nccl_communicator.h"

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace cohort::collective {
namespace {

// How often an operation checks its stream and the communicator's error.
constexpr absl::Duration kPoll = absl::Microseconds(50);

absl::Status CudaError(const char* what, cudaError_t error) {
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorString(error)));
}

absl::Status NcclError(const char* what, ncclResult_t result) {
  const absl::StatusCode code =
      result == ncclRemoteError || result == ncclSystemError
          ? absl::StatusCode::kUnavailable
          : absl::StatusCode::kInternal;
  return absl::Status(code,
                      absl::StrCat(what, ": ", ncclGetErrorString(result)));
}

absl::StatusOr<ncclDataType_t> NcclType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kBFloat16:
      return ncclBfloat16;
  }
  return absl::InvalidArgumentError("unknown dtype");
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMean:
      return ncclAvg;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
  }
  return ncclSum;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    const NcclOptions& options, Store& store) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options.rank, " is out of range for a group of ",
                     options.size));
  }
  std::unique_ptr<NcclCommunicator> comm(new NcclCommunicator(options));
  if (absl::Status init = comm->Init(store); !init.ok()) {
    // Not finalized as if healthy: a communicator still initialising, or in
    // error, is aborted.
    comm->Abort(init);
    return init;
  }
  return comm;
}

absl::Status NcclCommunicator::Init(Store& store) {
  if (cudaError_t e = cudaSetDevice(options_.device); e != cudaSuccess) {
    return CudaError("cudaSetDevice", e);
  }
  if (cudaError_t e =
          cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
      e != cudaSuccess) {
    return CudaError("cudaStreamCreate", e);
  }
  if (cudaError_t e = cudaMalloc(&barrier_scratch_, sizeof(int));
      e != cudaSuccess) {
    return CudaError("cudaMalloc", e);
  }
  const std::string key = absl::StrCat(options_.group, "/nccl_unique_id");
  ncclUniqueId id;
  if (options_.rank == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      return NcclError("ncclGetUniqueId", r);
    }
    COHORT_RETURN_IF_ERROR(store.Set(
        key, std::string(reinterpret_cast<const char*>(&id), sizeof(id))));
  } else {
    COHORT_ASSIGN_OR_RETURN(std::string bytes,
                            store.Get(key, options_.communicator.timeout));
    if (bytes.size() != sizeof(id)) {
      return absl::DataLossError(
          absl::StrCat("the NCCL unique id in the store has ", bytes.size(),
                       " bytes, not ", sizeof(id)));
    }
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  // Non-blocking init, so that a rank that never joins ends in a deadline.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r =
      ncclCommInitRankConfig(&comm_, options_.size, id, options_.rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    return NcclError("ncclCommInitRankConfig", r);
  }
  // The store's abort ends the wait: a peer that will never join (its
  // attempt ended) must not hold this rank for the whole timeout.
  return WaitForComm(absl::Now() + options_.communicator.timeout, &store);
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) {
    // A communicator that failed may have kernels stuck; abort frees it
    // without waiting for them.
    bool healthy;
    {
      absl::MutexLock lock(&mu_);
      healthy = failed_.ok();
    }
    // Finalize is asynchronous on a non-blocking communicator: wait for it
    // (bounded), and abort instead if it does not finish.
    if (healthy) {
      const ncclResult_t r = [&] {
        absl::MutexLock lock(&comm_mu_);
        return ncclCommFinalize(comm_);
      }();
      healthy = (r == ncclSuccess || r == ncclInProgress) &&
                WaitForComm(absl::Now() + absl::Seconds(10)).ok();
    }
    absl::MutexLock lock(&comm_mu_);
    if (healthy) {
      ncclCommDestroy(comm_);
    } else if (!aborted_.exchange(true)) {
      ncclCommAbort(comm_);
    }
  }
  if (barrier_scratch_ != nullptr) cudaFree(barrier_scratch_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status NcclCommunicator::AbortReason() {
  absl::MutexLock lock(&mu_);
  return failed_.ok() ? absl::AbortedError("the communicator was aborted")
                      : failed_;
}

absl::Status NcclCommunicator::AsyncState(ncclResult_t* state) {
  absl::MutexLock lock(&comm_mu_);
  if (aborted_.load()) return AbortReason();
  if (ncclResult_t r = ncclCommGetAsyncError(comm_, state); r != ncclSuccess) {
    return NcclError("ncclCommGetAsyncError", r);
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::WaitForComm(absl::Time deadline,
                                           const Store* store) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    COHORT_RETURN_IF_ERROR(AsyncState(&state));
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) return NcclError("NCCL communicator", state);
    if (store != nullptr) COHORT_RETURN_IF_ERROR(store->aborted());
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "NCCL group \"", options_.group, "\" did not ",
          store != nullptr ? "finish initialising" : "finish an operation",
          " before the deadline"));
    }
    absl::SleepFor(kPoll);
  }
}

template <typename Launch>
absl::Status NcclCommunicator::Run(const char* what, Launch launch) {
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.ok()) return failed_;
  }
  const absl::Time deadline = absl::Now() + options_.communicator.timeout;
  absl::Status status = [&] {
    absl::MutexLock lock(&comm_mu_);
    if (aborted_.load()) {
      const absl::Status reason = AbortReason();
      return absl::Status(reason.code(),
                          absl::StrCat(what, ": ", reason.message()));
    }
    const ncclResult_t r = launch();
    return r == ncclSuccess || r == ncclInProgress ? absl::OkStatus()
                                                   : NcclError(what, r);
  }();
  if (status.ok()) status = WaitForComm(deadline);
  while (status.ok()) {
    const cudaError_t done = cudaStreamQuery(stream_);
    if (done == cudaSuccess) {
      // Kernels an abort cut short end too: their output is not a result.
      if (aborted_.load()) {
        const absl::Status reason = AbortReason();
        status = absl::Status(reason.code(),
                              absl::StrCat(what, ": ", reason.message()));
      }
      break;
    }
    if (done != cudaErrorNotReady) {
      status = CudaError(what, done);
      break;
    }
    ncclResult_t state = ncclSuccess;
    if (absl::Status polled = AsyncState(&state); !polled.ok()) {
      status = absl::Status(polled.code(),
                            absl::StrCat(what, ": ", polled.message()));
    } else if (state != ncclSuccess && state != ncclInProgress) {
      status = NcclError(what, state);
    } else if (absl::Now() >= deadline) {
      status = absl::DeadlineExceededError(
          absl::StrCat(what, " on NCCL group \"", options_.group,
                       "\" did not complete before the deadline"));
    } else {
      absl::SleepFor(kPoll);
    }
  }
  if (!status.ok()) Abort(status);
  return status;
}

absl::Status NcclCommunicator::AllReduce(void* data, size_t count, DType dtype,
                                         ReduceOp op) {
  COHORT_RETURN_IF_ERROR(CheckSupported(dtype, op));
  COHORT_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(dtype));
  return Run("ncclAllReduce", [&] {
    return ncclAllReduce(data, data, count, type, NcclOp(op), comm_, stream_);
  });
}

absl::Status NcclCommunicator::Reduce(void* data, size_t count, DType dtype,
                                      ReduceOp op, int root) {
  COHORT_RETURN_IF_ERROR(CheckSupported(dtype, op));
  COHORT_RETURN_IF_ERROR(CheckRoot("reduce", root, size()));
  COHORT_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(dtype));
  // Only the root's buffer is written: the others send from theirs.
  return Run("ncclReduce", [&] {
    return ncclReduce(data, data, count, type, NcclOp(op), root, comm_,
                      stream_);
  });
}

absl::Status NcclCommunicator::Broadcast(void* data, size_t count, DType dtype,
                                         int root) {
  COHORT_RETURN_IF_ERROR(CheckRoot("broadcast", root, size()));
  COHORT_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(dtype));
  return Run("ncclBroadcast", [&] {
    return ncclBroadcast(data, data, count, type, root, comm_, stream_);
  });
}

absl::Status NcclCommunicator::AllGather(const void* input, void* output,
                                         size_t count, DType dtype) {
  COHORT_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(dtype));
  return Run("ncclAllGather", [&] {
    return ncclAllGather(input, output, count, type, comm_, stream_);
  });
}

absl::Status NcclCommunicator::ReduceScatter(const void* input, void* output,
                                             size_t count, DType dtype,
                                             ReduceOp op) {
  COHORT_RETURN_IF_ERROR(CheckSupported(dtype, op));
  COHORT_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(dtype));
  return Run("ncclReduceScatter", [&] {
    return ncclReduceScatter(input, output, count, type, NcclOp(op), comm_,
                             stream_);
  });
}

absl::Status NcclCommunicator::Barrier() {
  return Run("barrier", [&] {
    return ncclAllReduce(barrier_scratch_, barrier_scratch_, 1, ncclInt32,
                         ncclSum, comm_, stream_);
  });
}

void NcclCommunicator::Abort(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (failed_.ok()) failed_ = AbortStatus(status);
  }
  // Waits for a poll under way; the poller then sees aborted_ and stops.
  absl::MutexLock lock(&comm_mu_);
  if (comm_ != nullptr && !aborted_.exchange(true)) ncclCommAbort(comm_);
}

}  // namespace cohort::collective
